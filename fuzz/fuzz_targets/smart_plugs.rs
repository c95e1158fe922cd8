//! Shelly and Tasmota answer bodies.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| greenpipe_fuzz::smart_plugs(data));
