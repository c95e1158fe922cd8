//! The model file (JSON).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = greenpipe_common::model::ModelFile::from_json(&String::from_utf8_lossy(data));
});
