//! /proc/stat, meminfo, vmstat, diskstats and net/dev text.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| greenpipe_fuzz::proc_files(data));
