//! The exporter's TOML configuration file.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = toml::from_str::<greenpipe_exporter::config::FileConfig>(&String::from_utf8_lossy(data));
});
