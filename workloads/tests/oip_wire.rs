//! The Open Inference Protocol v2 spoken directly: HTTP/2 frames through the `h2` crate and
//! protobuf bytes encoded and decoded by hand in this file, with the field numbers of the
//! published `grpc_predict_v2.proto` — not through our client, our generated code or our
//! `.proto`. If a field number or type in our `.proto` drifted from the specification, an
//! independent client would break, and so does this test.

use std::time::Duration;

use crate::common::*;
use bytes::Bytes;
use http::Request;

// ---- A minimal protobuf wire encoder/decoder --------------------------------------------

fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn field_bytes(field: u32, data: &[u8], out: &mut Vec<u8>) {
    varint(u64::from(field) << 3 | 2, out);
    varint(data.len() as u64, out);
    out.extend_from_slice(data);
}

fn field_packed_i64(field: u32, values: &[i64], out: &mut Vec<u8>) {
    let mut packed = Vec::new();
    for v in values {
        varint(*v as u64, &mut packed);
    }
    field_bytes(field, &packed, out);
}

/// One decoded field: number and either a varint or a length-delimited payload.
#[derive(Debug)]
enum Wire {
    Varint(u64),
    Bytes(Vec<u8>),
}

fn read_varint(buf: &[u8], at: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let b = buf[*at];
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

fn decode(buf: &[u8]) -> Vec<(u32, Wire)> {
    let mut at = 0;
    let mut fields = Vec::new();
    while at < buf.len() {
        let key = read_varint(buf, &mut at);
        let (field, kind) = ((key >> 3) as u32, key & 7);
        match kind {
            0 => fields.push((field, Wire::Varint(read_varint(buf, &mut at)))),
            2 => {
                let len = read_varint(buf, &mut at) as usize;
                fields.push((field, Wire::Bytes(buf[at..at + len].to_vec())));
                at += len;
            }
            other => panic!("unexpected wire type {other} for field {field}"),
        }
    }
    fields
}

fn bytes_of(fields: &[(u32, Wire)], field: u32) -> Vec<Vec<u8>> {
    fields
        .iter()
        .filter_map(|(f, w)| match (f, w) {
            (f, Wire::Bytes(b)) if *f == field => Some(b.clone()),
            _ => None,
        })
        .collect()
}

fn string_of(fields: &[(u32, Wire)], field: u32) -> String {
    String::from_utf8(bytes_of(fields, field).pop().unwrap_or_default()).unwrap()
}

fn packed_i64(fields: &[(u32, Wire)], field: u32) -> Vec<i64> {
    let mut out = Vec::new();
    for b in bytes_of(fields, field) {
        let mut at = 0;
        while at < b.len() {
            out.push(read_varint(&b, &mut at) as i64);
        }
    }
    out
}

/// ModelInferRequest{model_name=1, id=3, inputs=5 {name=1, datatype=2, shape=3},
/// raw_input_contents=7}.
fn infer_request(model: &str, shape: &[i64], raw: &[u8]) -> Vec<u8> {
    let mut input = Vec::new();
    field_bytes(1, b"input", &mut input);
    field_bytes(2, b"FP32", &mut input);
    field_packed_i64(3, shape, &mut input);
    let mut req = Vec::new();
    field_bytes(1, model.as_bytes(), &mut req);
    field_bytes(3, b"wire-1", &mut req);
    field_bytes(5, &input, &mut req);
    field_bytes(7, raw, &mut req);
    req
}

// ---- gRPC over HTTP/2 ----------------------------------------------------------------------

struct Answer {
    status: Option<String>,
    message: Vec<u8>,
}

async fn call(port: u16, method: &str, body: &[u8]) -> Answer {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.unwrap();
    let request = Request::builder()
        .method("POST")
        .uri(format!(
            "http://127.0.0.1:{port}/inference.GRPCInferenceService/{method}"
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(request, false).unwrap();
    // Length-prefixed message: compressed flag 0, 4-byte big-endian length.
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
    framed.extend_from_slice(body);
    send.send_data(Bytes::from(framed), true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .split(';')
            .next(),
        Some("application/grpc")
    );
    // A gRPC error may come as a trailers-only response: status in the headers.
    let header_status = response
        .headers()
        .get("grpc-status")
        .map(|v| v.to_str().unwrap().to_string());
    let mut body = response.into_body();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let trailer_status = body.trailers().await.unwrap().and_then(|t| {
        t.get("grpc-status")
            .map(|v| v.to_str().unwrap().to_string())
    });
    let message = if data.len() >= 5 {
        assert_eq!(data[0], 0, "uncompressed message");
        let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
        assert_eq!(data.len(), 5 + len, "one message");
        data[5..].to_vec()
    } else {
        Vec::new()
    };
    Answer {
        status: trailer_status.or(header_status),
        message,
    }
}

#[test]
fn raw_grpc_frames_against_the_published_field_numbers() {
    let (grpc, web) = (free_port(), free_port());
    let _server = Proc::spawn(&[
        "serve",
        "--model",
        "efficientnet_b0",
        "--image-size",
        "64",
        "--grpc.listen-address",
        &format!("127.0.0.1:{grpc}"),
        "--web.listen-address",
        &format!("127.0.0.1:{web}"),
    ]);
    wait_listening(grpc, Duration::from_secs(120));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // ServerLive: empty request; response field 1 (bool live) = true.
        let live = call(grpc, "ServerLive", &[]).await;
        assert_eq!(live.status.as_deref(), Some("0"));
        assert_eq!(live.message, vec![0x08, 0x01]);

        // ModelReady{name=1}: ready=1 true.
        let mut ready = Vec::new();
        field_bytes(1, b"efficientnet_b0", &mut ready);
        let r = call(grpc, "ModelReady", &ready).await;
        assert!(
            matches!(decode(&r.message)[..], [(1, Wire::Varint(1))]),
            "ModelReady: {:?}",
            decode(&r.message)
        );

        // ServerMetadata: name=1, version=2.
        let meta = decode(&call(grpc, "ServerMetadata", &[]).await.message);
        assert_eq!(string_of(&meta, 1), "greenpipe-workload");
        assert!(!string_of(&meta, 2).is_empty());

        // ModelMetadata: name=1, versions=2, platform=3, inputs=4 / outputs=5 TensorMetadata
        // {name=1, datatype=2, shape=3}.
        let m = decode(&call(grpc, "ModelMetadata", &ready).await.message);
        assert_eq!(string_of(&m, 1), "efficientnet_b0");
        assert_eq!(string_of(&m, 2), "1");
        // The default engine's backend and format.
        assert_eq!(string_of(&m, 3), "tract_onnx");
        let inputs = bytes_of(&m, 4);
        assert_eq!(inputs.len(), 1);
        let input = decode(&inputs[0]);
        assert_eq!(string_of(&input, 1), "input");
        assert_eq!(string_of(&input, 2), "FP32");
        assert_eq!(packed_i64(&input, 3), vec![1, 3, 64, 64]);
        let output = decode(&bytes_of(&m, 5)[0]);
        assert_eq!(string_of(&output, 1), "logits");
        assert_eq!(packed_i64(&output, 3), vec![1, 1000]);

        // ModelInfer with raw_input_contents: model_name=1, id=3, outputs=5, raw_output_contents=6.
        let pixels: Vec<u8> = (0..3 * 64 * 64)
            .flat_map(|i| ((i % 17) as f32 / 17.0 - 0.5).to_le_bytes())
            .collect();
        let answer = call(
            grpc,
            "ModelInfer",
            &infer_request("efficientnet_b0", &[1, 3, 64, 64], &pixels),
        )
        .await;
        assert_eq!(answer.status.as_deref(), Some("0"));
        let resp = decode(&answer.message);
        assert_eq!(string_of(&resp, 1), "efficientnet_b0");
        assert_eq!(string_of(&resp, 3), "wire-1");
        let out = decode(&bytes_of(&resp, 5)[0]);
        assert_eq!(string_of(&out, 1), "logits");
        assert_eq!(string_of(&out, 2), "FP32");
        assert_eq!(packed_i64(&out, 3), vec![1, 1000]);
        let raw = bytes_of(&resp, 6);
        assert_eq!(raw.len(), 1);
        assert_eq!(raw[0].len(), 4000);
        let logits: Vec<f32> = raw[0]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert!(logits.iter().all(|v| v.is_finite()));
        assert!(
            logits.iter().any(|v| *v != logits[0]),
            "logits are not constant"
        );

        // Wrong shape: grpc-status 3 (INVALID_ARGUMENT), and the server answers afterwards.
        let bad = call(
            grpc,
            "ModelInfer",
            &infer_request("efficientnet_b0", &[1, 3, 60, 60], &pixels),
        )
        .await;
        assert_eq!(bad.status.as_deref(), Some("3"));
        let again = call(grpc, "ServerLive", &[]).await;
        assert_eq!(again.message, vec![0x08, 0x01]);
    });
}
