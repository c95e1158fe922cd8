//! --web.config.file (exporter-toolkit YAML).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = greenpipe_web::config::WebConfigFile::parse(&String::from_utf8_lossy(data), "fuzz");
});
