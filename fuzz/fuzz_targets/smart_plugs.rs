//! Shelly and Tasmota answer bodies.
#![no_main]
use greenpipe_exporter::meter::{shelly, tasmota};
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    for r in [shelly::parse(&doc, "http://p"), tasmota::parse(&doc, "http://p")].into_iter().flatten() {
        assert!(r.power_watts.is_some_and(f64::is_finite));
    }
});
