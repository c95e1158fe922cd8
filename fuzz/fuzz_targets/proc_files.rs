//! /proc/stat, meminfo, vmstat, diskstats and net/dev text.
#![no_main]
use greenpipe_exporter::collector::{cpu, diskstats, meminfo, netdev, vmstat};
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = cpu::parse_stat(&text);
    let _ = meminfo::parse_meminfo(&text);
    let _ = vmstat::parse_vmstat(&text);
    let _ = netdev::for_each_interface(&text, |_| {});
    for line in text.lines() {
        let _ = diskstats::parse_line(line);
    }
});
