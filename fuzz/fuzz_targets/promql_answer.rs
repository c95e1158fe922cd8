//! The estimator's PromQL answer decoder.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| greenpipe_fuzz::promql_answer(data));
