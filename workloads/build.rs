//! Generates the Open Inference Protocol v2 messages and service (tonic + prost) from
//! `proto/grpc_predict_v2.proto`, and the ONNX model messages from `proto/onnx.proto3`. Needs
//! `protoc` (Debian's protobuf-compiler, installed by
//! scripts/setup.sh; `PROTOC` may point elsewhere).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/grpc_predict_v2.proto");
    println!("cargo:rerun-if-changed=proto/onnx.proto3");
    println!("cargo:rerun-if-env-changed=PROTOC");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/grpc_predict_v2.proto"], &["proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .compile_protos(&["proto/onnx.proto3"], &["proto"])?;
    Ok(())
}
