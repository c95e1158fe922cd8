//! cgroup cpu.stat, io.stat, blkio, single-value files, cgroup.procs and cgroup paths.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| greenpipe_fuzz::cgroup_files(data));
