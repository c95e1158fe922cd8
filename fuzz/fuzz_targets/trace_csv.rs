//! The trace CSV.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = greenpipe_common::trace::parse_trace("fuzz.csv", &text);
    let with_header = format!("{}\n{text}", greenpipe_common::features::trace_header());
    let _ = greenpipe_common::trace::parse_trace("fuzz.csv", &with_header);
});
