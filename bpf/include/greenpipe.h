/* Map layouts shared by the BPF programs and the exporter.
 * Keep in sync with exporter/src/bpf/abi.rs (a size test there guards the layout). */
#ifndef GREENPIPE_H
#define GREENPIPE_H

/* Bound of the per-cgroup map. LRU: under a storm of short-lived cgroups the least recently
 * updated entry is evicted, never an allocation failure; the exporter also deletes removed
 * cgroups each cycle, so in practice the map holds the live cgroups only. */
#define GREENPIPE_MAX_CGROUPS 10240

/* Default bound of the per-process map (the exporter sets the real one before loading:
 * --collector.ebpf.max-processes, or 1 when per-process accounting is off). LRU as well; the
 * BPF side deletes a process's entry when its last thread exits. */
#define GREENPIPE_MAX_PROCESSES 8192

/* Per-CPU counters of one cgroup v2 (key: cgroup id = inode number of its directory), and of
 * one process when per-process accounting is on (key: tgid, in the `process_counters` map). */
struct cgroup_counters {
	__u64 cpu_ns;               /* on-CPU time of finished slices */
	__u64 page_cache_hits;      /* pages read() found in the page cache */
	__u64 page_cache_additions; /* pages added to the page cache (misses filled, new pages) */
	__u64 disk_read_bytes;      /* bios queued to request-based (bottom) devices */
	__u64 disk_write_bytes;
	__u64 net_tx_bytes;         /* inet socket payload sent */
	__u64 net_rx_bytes;         /* inet socket payload received */
};

/* Per-CPU scheduling state. The slice running now: who and since when (bpf_ktime_get_ns,
 * CLOCK_MONOTONIC). Finished slices of consecutive runs of one cgroup are summed here and
 * only added to cgroup_counters when another cgroup runs on this CPU: most switches (a
 * cgroup's threads ping-ponging, a task and the idle task) then touch no hash map at all. */
struct running_slice {
	__u64 start_ns;
	__u64 cgroup_id;      /* 0 = idle task */
	__u64 pending_cgroup; /* whose finished slices pending_ns holds */
	__u64 pending_ns;
	__u64 start_runtime_ns; /* the running task's se.sum_exec_runtime at switch-in */
	/* Per-process accounting only (zero when it is off): the same holding scheme keyed by
	 * tgid, with two slots, so a process's threads, its idle gaps, and two processes taking
	 * turns on one CPU (a pipe's writer and reader, a task and its kworker) touch no hash
	 * map. Slot 0 holds the process held most recently. */
	__u64 tgid;                 /* process of the running task; 0 = idle */
	__u64 pending_tgid;         /* slot 0: whose finished slices pending_process_ns holds */
	__u64 pending_process_ns;
	__u64 pending_tgid_older;   /* slot 1 */
	__u64 pending_process_ns_older;
	/* Times held time moved from this CPU's slots into a counters map: the exporter reads
	 * the slots before and after the maps and retries when this moved in between (held time
	 * would be in neither of its reads, or in both). */
	__u64 flushes;
	/* Thread id of the running task: the exporter reads its scheduler runtime to measure the
	 * open slice without the stolen and interrupt time a wall-clock difference includes. */
	__u64 pid;
};

#endif
