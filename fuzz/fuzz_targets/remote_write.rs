//! Remote-write bodies: decode never panics; what decodes re-encodes to a body that decodes the same.
#![no_main]
use greenpipe_remote_write::{decode, encode};
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(req) = decode(data) {
        let again = decode(&encode(req.timeseries.clone())).expect("our own body decodes");
        assert_eq!(again.timeseries.len(), req.timeseries.len());
    }
});
