//! Generates the ONNX messages (prost) from `proto/onnx.proto3` and the TFLite tables (planus)
//! from `schema/schema.fbs`, both into `OUT_DIR`. prost needs `protoc` (Debian's
//! protobuf-compiler, installed by scripts/setup.sh; `PROTOC` may point elsewhere); planus is
//! pure Rust.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/onnx.proto3");
    println!("cargo:rerun-if-changed=schema/schema.fbs");
    println!("cargo:rerun-if-env-changed=PROTOC");
    prost_build::compile_protos(&["proto/onnx.proto3"], &["proto"])?;

    let declarations = planus_translation::translate_files(&["schema/schema.fbs"])
        .ok_or("schema/schema.fbs does not translate (planus printed why above)")?;
    // Unformatted: it is only include!d, and formatting would need rustfmt.
    let code = planus_codegen::generate_rust(&declarations, false)?;
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    std::fs::write(out.join("tflite.rs"), code)?;
    Ok(())
}
