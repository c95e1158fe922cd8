//! The estimator's PromQL answer decoder.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = greenpipe_estimator::promql::decode_matrix(data);
});
