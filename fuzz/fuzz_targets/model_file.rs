//! The model file (JSON).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| greenpipe_fuzz::model_file(data));
