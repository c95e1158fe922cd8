//! Served mode end to end on loopback: `serve` and `client` as real processes; both sides count
//! the same inferences, the server's latency histogram fills, `/metrics` is promtool-clean, a
//! wrong request gets INVALID_ARGUMENT (or NOT_FOUND) and the server keeps serving, and SIGTERM
//! closes the server's window into the campaign log.

use std::time::Duration;

use crate::common::*;
use greenpipe_workload::oip::pb::grpc_inference_service_client::GrpcInferenceServiceClient;
use greenpipe_workload::oip::pb::model_infer_request::InferInputTensor;
use greenpipe_workload::oip::pb::{
    InferTensorContents, ModelInferRequest, ModelReadyRequest, ServerReadyRequest,
};

fn request(shape: Vec<i64>, datatype: &str, model: &str) -> ModelInferRequest {
    let n: i64 = shape.iter().product();
    ModelInferRequest {
        model_name: model.into(),
        id: "t".into(),
        inputs: vec![InferInputTensor {
            name: "input".into(),
            datatype: datatype.into(),
            shape,
            ..Default::default()
        }],
        raw_input_contents: vec![vec![0u8; 4 * n as usize]],
        ..Default::default()
    }
}

#[test]
fn serve_and_client_agree_and_bad_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("campaign.jsonl");
    let log_s = log.to_str().unwrap();
    let (grpc, web, client_web) = (free_port(), free_port(), free_port());
    let grpc_addr = format!("127.0.0.1:{grpc}");
    let server = Proc::spawn(&[
        "serve",
        "--model",
        "mobilenet_v2",
        "--precision",
        "int8",
        "--image-size",
        "64",
        "--grpc.listen-address",
        &grpc_addr,
        "--web.listen-address",
        &format!("127.0.0.1:{web}"),
        "--campaign-log",
        log_s,
        "--node",
        "test-node",
    ]);
    wait_listening(grpc, Duration::from_secs(120));

    let client = Proc::spawn(&[
        "client",
        "--target",
        &grpc_addr,
        "--model",
        "mobilenet_v2",
        "--concurrency",
        "2",
        "--requests",
        "12",
        "--duration",
        "5m",
        "--web.listen-address",
        &format!("127.0.0.1:{client_web}"),
        "--campaign-log",
        log_s,
        "--node",
        "test-node",
    ]);
    let (status, out) = client.wait();
    assert!(status.success(), "client failed: {out}");
    // The client prints its window: 12 answered requests of one image, no error.
    let t = totals(&out);
    assert_eq!(t["operations"], 12, "{t}");
    assert_eq!(t["inferences"], 12, "{t}");
    assert_eq!(t["config"]["errors"], 0, "{t}");

    let text = scrape(web);
    promtool_check(&text);
    let served = [
        r#"workload="serve""#,
        r#"model="mobilenet_v2""#,
        r#"precision="int8""#,
        r#"mode="served""#,
    ];
    assert_eq!(
        sample(&text, "greenpipe_workload_inferences_total", &served),
        Some(12.0),
        "server and client disagree:\n{text}"
    );
    assert_eq!(
        sample(
            &text,
            "greenpipe_workload_inference_duration_seconds_count",
            &served
        ),
        Some(12.0)
    );
    let sum = sample(
        &text,
        "greenpipe_workload_inference_duration_seconds_sum",
        &served,
    )
    .unwrap();
    assert!(sum > 0.0, "latency histogram empty");

    // Wrong requests, through a tonic client of the same .proto.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = GrpcInferenceServiceClient::connect(format!("http://{grpc_addr}"))
            .await
            .unwrap();
        let ready = c
            .server_ready(ServerReadyRequest {})
            .await
            .unwrap()
            .into_inner();
        assert!(ready.ready);
        let unknown = c
            .model_ready(ModelReadyRequest {
                name: "vgg".into(),
                version: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!unknown.ready);

        let wrong_shape = c
            .model_infer(request(vec![1, 3, 32, 32], "FP32", "mobilenet_v2"))
            .await;
        let status = wrong_shape.expect_err("a 32×32 input must be refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("shape"), "{}", status.message());

        let wrong_type = c
            .model_infer(request(vec![1, 3, 64, 64], "FP16", "mobilenet_v2"))
            .await;
        assert_eq!(wrong_type.unwrap_err().code(), tonic::Code::InvalidArgument);

        let mut short = request(vec![1, 3, 64, 64], "FP32", "mobilenet_v2");
        short.raw_input_contents[0].truncate(100);
        assert_eq!(
            c.model_infer(short).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );

        let unknown_model = c
            .model_infer(request(vec![1, 3, 64, 64], "FP32", "vgg16"))
            .await;
        assert_eq!(unknown_model.unwrap_err().code(), tonic::Code::NotFound);

        // Typed contents instead of raw bytes work too, and the server still serves.
        let mut typed = request(vec![1, 3, 64, 64], "FP32", "mobilenet_v2");
        typed.raw_input_contents.clear();
        typed.inputs[0].contents = Some(InferTensorContents {
            fp32_contents: vec![0.25; 3 * 64 * 64],
            ..Default::default()
        });
        let ok = c
            .model_infer(typed)
            .await
            .expect("server keeps serving")
            .into_inner();
        assert_eq!(ok.id, "t");
        assert_eq!(ok.outputs[0].shape, vec![1, 1000]);
        assert_eq!(ok.raw_output_contents[0].len(), 4000);
    });

    let text = scrape(web);
    assert_eq!(
        sample(
            &text,
            "greenpipe_workload_request_errors_total",
            &[r#"code="INVALID_ARGUMENT""#]
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(&text, "greenpipe_workload_inferences_total", &served),
        Some(13.0)
    );

    let (status, out) = server.terminate();
    assert!(status.success(), "server exit {status:?}");
    assert_eq!(totals(&out)["inferences"], 13);
    let windows = windows(&log);
    let by = |w: &str| windows.iter().find(|x| x["workload"] == w).cloned();
    let client_w = by("client").expect("client window");
    let serve_w = by("serve").expect("serve window");
    assert_eq!(client_w["inferences"], 12);
    assert_eq!(serve_w["inferences"], 13);
    assert_eq!(serve_w["group"], "inference");
    assert_eq!(serve_w["node"], "test-node");
    assert_eq!(serve_w["config"]["precision"], "int8");
    assert_eq!(serve_w["config"]["mode"], "served");
    // No planned duration: SIGTERM is the planned end.
    assert_eq!(serve_w["complete"], true);
    let (s0, s1) = (
        serve_w["start"].as_f64().unwrap(),
        serve_w["end"].as_f64().unwrap(),
    );
    let (c0, c1) = (
        client_w["start"].as_f64().unwrap(),
        client_w["end"].as_f64().unwrap(),
    );
    assert!(s0 <= c0 && c1 <= s1, "client window inside the server's");
}

#[test]
fn client_reports_a_server_that_is_down() {
    let port = free_port();
    let out = std::process::Command::new(BIN)
        .args([
            "client",
            "--target",
            &format!("127.0.0.1:{port}"),
            "--model",
            "mobilenet_v2",
        ])
        .args([
            "--concurrency",
            "1",
            "--server-wait",
            "1s",
            "--web.listen-address",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a client without a server must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the inference server"), "{err}");
}

#[test]
fn a_client_started_before_its_server_waits_for_it() {
    // As in a campaign step or one Job rollout: the client starts first, the server listens only
    // once its model is built; the client's window is its load, after the server answered.
    let (grpc, web) = (free_port(), free_port());
    let grpc_addr = format!("127.0.0.1:{grpc}");
    let client = Proc::spawn(&[
        "client",
        "--target",
        &grpc_addr,
        "--model",
        "mobilenet_v2",
        "--concurrency",
        "1",
        "--requests",
        "3",
        "--duration",
        "5m",
        "--server-wait",
        "5m",
        "--web.listen-address",
        &format!("127.0.0.1:{}", free_port()),
    ]);
    // The client is up (serving its own /metrics) before the server process exists.
    std::thread::sleep(Duration::from_secs(1));
    let before_server = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let server = Proc::spawn(&[
        "serve",
        "--model",
        "mobilenet_v2",
        "--precision",
        "int8",
        "--image-size",
        "64",
        "--grpc.listen-address",
        &grpc_addr,
        "--web.listen-address",
        &format!("127.0.0.1:{web}"),
    ]);
    let (status, out) = client.wait();
    assert!(status.success(), "client failed: {out}");
    let t = totals(&out);
    assert_eq!(t["operations"], 3, "{t}");
    assert!(
        t["start"].as_f64().unwrap() > before_server,
        "the client's window began before the server existed: {t}"
    );
    server.terminate();
}
