//! cgroup cpu.stat, io.stat, blkio, single-value files, cgroup.procs and cgroup paths.
#![no_main]
use greenpipe_exporter::collector::cgroup::parse as cg;
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = cg::cpu_stat_usage_usec(&text);
    let _ = cg::single_u64(&text);
    let _ = cg::io_stat(&text, |_, _| true);
    let _ = cg::blkio_service_bytes(&text, |_, _| true);
    let _ = cg::procs(&text);
    if let Some(c) = greenpipe_exporter::container_id::from_cgroup_path(&text) {
        assert_eq!(c.container_id.len(), 64);
    }
});
