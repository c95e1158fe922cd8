//! The exporter's TOML configuration file.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| greenpipe_fuzz::toml_config(data));
