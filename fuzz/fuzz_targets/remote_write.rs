//! Remote-write bodies: decode never panics; what decodes re-encodes to a body that decodes the same.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| greenpipe_fuzz::remote_write(data));
