//! --web.config.file (exporter-toolkit YAML).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| greenpipe_fuzz::web_config(data));
