// SPDX-License-Identifier: GPL-2.0
/* Per-cgroup resource accounting: on-CPU time, page-cache activity, block and network bytes;
 * the same per process (tgid) when the exporter turns `per_process` on.
 *
 * Every program is a BTF tracepoint (tp_btf) or fentry: no kprobes (not configured on our
 * target kernels) and no tracefs (tp_btf needs neither). Counters live in one LRU per-CPU hash
 * keyed by cgroup v2 id, so the hot paths never take an atomic or share a cache line between
 * CPUs; the exporter sums CPUs when it reads. See docs/ebpf.md for the signals and their limits. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "greenpipe.h"

char LICENSE[] SEC("license") = "GPL";

#define AF_INET 2
#define AF_INET6 10
#define MSG_PEEK 2
#define REQ_OP_MASK 0xff
#define REQ_OP_READ 0
#define REQ_OP_WRITE 1
#define PF_EXITING 0x00000004

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, GREENPIPE_MAX_CGROUPS);
	__type(key, __u64);
	__type(value, struct cgroup_counters);
} cgroup_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct running_slice);
} running SEC(".maps");

/* Per-process accounting, off unless the exporter sets this before loading (aya
 * override_global). It lives in the frozen .rodata map, so the verifier knows its value and
 * removes every `if (per_process)` branch when it is 0: the off path costs nothing at all. */
const volatile __u32 per_process = 0;

/* The same counters keyed by tgid. The exporter resizes it before loading (to 1 when
 * per-process accounting is off); the LRU type bounds it under any churn, and the exit program
 * below deletes a process's entry when its last thread exits. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, GREENPIPE_MAX_PROCESSES);
	__type(key, __u32);
	__type(value, struct cgroup_counters);
} process_counters SEC(".maps");

static __always_inline struct cgroup_counters *entry_of(void *map, void *key)
{
	struct cgroup_counters *c = bpf_map_lookup_elem(map, key);
	if (c)
		return c;
	struct cgroup_counters zero = {};
	bpf_map_update_elem(map, key, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

static __always_inline struct cgroup_counters *counters_of(__u64 cgroup_id)
{
	return entry_of(&cgroup_counters, &cgroup_id);
}

static __always_inline struct cgroup_counters *process_counters_of(__u32 tgid)
{
	return entry_of(&process_counters, &tgid);
}

/* Whether `task` is a thread of a process whose last thread is exiting: signal->live has
 * dropped to 0, and on_process_exit has deleted (or is about to delete) the process's entry.
 * Its PF_EXITING flag is tested first so the signal struct is read only for exiting threads. */
static __always_inline bool process_exiting(struct task_struct *task)
{
	return (task->flags & PF_EXITING) && !task->signal->live.counter;
}

/* Adds `value` to `field` of the current task's cgroup, and of its process when per-process
 * accounting is on. Not to the process of a task past its exit: what the kernel still does
 * for it after on_process_exit would recreate the entry. On the 6.18 kernel the tracepoint
 * fires before BSD process accounting writes the exit record, and the page-cache page each
 * 64 records start left one entry of an exited process behind. */
#define COUNT_CURRENT(field, value)                                                           \
	do {                                                                                  \
		__u64 v_ = (value);                                                           \
		struct cgroup_counters *c_ = counters_of(bpf_get_current_cgroup_id());       \
		if (c_)                                                                       \
			c_->field += v_;                                                      \
		if (per_process && !process_exiting(bpf_get_current_task_btf())) {           \
			c_ = process_counters_of(bpf_get_current_pid_tgid() >> 32);           \
			if (c_)                                                               \
				c_->field += v_;                                              \
		}                                                                             \
	} while (0)

/* Held time reaches an existing entry only: time held for a process that has exited since
 * (on_process_exit deleted its entry) is dropped instead of recreating the entry. */
static __always_inline void flush_process(struct running_slice *slice, __u64 tgid, __u64 ns)
{
	if (!ns)
		return;
	__u32 key = tgid;
	struct cgroup_counters *c = bpf_map_lookup_elem(&process_counters, &key);
	if (c)
		c->cpu_ns += ns;
	slice->flushes++;
}

/* The finished slice of `prev` (`ran` ns) in the per-process holding slots: like the cgroup
 * one, it reaches the process's map entry only when a third process has run on this CPU since
 * (the older slot is flushed to make room). Two slots instead of one took the per-switch cost
 * with per-process on from ~90 ns above the off path to ~10 ns under stress-ng --switch, where
 * every switch changes process. */
static __always_inline void hold_process_slice(struct running_slice *slice,
					       struct task_struct *prev, __u64 ran)
{
	__u64 tgid = slice->tgid;
	/* A thread of a process whose last thread is exiting: holding its time would recreate
	 * the entry on_process_exit deletes. */
	if (process_exiting(prev)) {
		if (slice->pending_tgid == tgid)
			slice->pending_process_ns = 0;
		if (slice->pending_tgid_older == tgid)
			slice->pending_process_ns_older = 0;
		return;
	}
	if (slice->pending_tgid == tgid) {
		slice->pending_process_ns += ran;
		return;
	}
	__u64 older_tgid = slice->pending_tgid_older;
	__u64 older_ns = slice->pending_process_ns_older;
	slice->pending_tgid_older = slice->pending_tgid;
	slice->pending_process_ns_older = slice->pending_process_ns;
	slice->pending_tgid = tgid;
	if (older_tgid == tgid) {
		/* Its turn again: the two slots swap, no map access. */
		slice->pending_process_ns = older_ns + ran;
		return;
	}
	slice->pending_process_ns = ran;
	/* The process's entry is created here, while it is known to be alive (it just ran and
	 * is not exiting), so that flushing its held time later needs no creation. */
	__u32 key = tgid;
	process_counters_of(key);
	flush_process(slice, older_tgid, older_ns);
}

/* Switch-out closes the slice of the CPU's running task; switch-in opens the next one. The
 * open slice and the not-yet-flushed finished ones stay readable in `running`, so the exporter
 * adds them at read time and a task that never leaves the CPU still shows smooth usage. */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 zero = 0;
	struct running_slice *slice = bpf_map_lookup_elem(&running, &zero);
	if (!slice)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	/* pid 0 is this CPU's idle task: idle time belongs to no cgroup. */
	if (slice->start_ns && prev->pid) {
		__u64 cgroup_id = slice->cgroup_id;
		__u64 wall = now - slice->start_ns;
		/* The slice's length is the scheduler's own runtime of the task (up to date here:
		 * the scheduler updated it when it picked the next task), which leaves out time the
		 * hypervisor stole, as cpu.stat does. The clock only catches nonsense (a runtime
		 * longer than the slice by more than clock skew could explain). */
		__u64 ran;
		if (prev->pid == slice->pid) {
			ran = prev->se.sum_exec_runtime - slice->start_runtime_ns;
		} else {
			/* prev is not the task this program last saw switched in here: a switch-in
			 * went unseen (a few per second on this VM's 6.18 kernel under load). Its own
			 * cgroup owns the slice, and the scheduler's mark of when it was picked
			 * (prev_sum_exec_runtime) gives its length; otherwise the slice went to the
			 * previous task's cgroup, or nowhere after idle. */
			cgroup_id = prev->cgroups->dfl_cgrp->kn->id;
			ran = prev->se.sum_exec_runtime - prev->se.prev_sum_exec_runtime;
			if (per_process)
				slice->tgid = prev->tgid;
		}
		if (ran > wall + 1000000)
			ran = wall;
		if (cgroup_id != slice->pending_cgroup) {
			if (slice->pending_ns) {
				struct cgroup_counters *c = counters_of(slice->pending_cgroup);
				if (c)
					c->cpu_ns += slice->pending_ns;
				slice->flushes++;
			}
			slice->pending_cgroup = cgroup_id;
			slice->pending_ns = 0;
		}
		slice->pending_ns += ran;
		if (per_process)
			hold_process_slice(slice, prev, ran);
	}
	slice->start_ns = now;
	slice->start_runtime_ns = next->se.sum_exec_runtime;
	slice->pid = next->pid;
	/* The pointer walk is plain loads on BTF pointers (tp_btf), not four
	 * bpf_probe_read_kernel calls: this is the hottest path of the exporter. */
	slice->cgroup_id = next->pid ? next->cgroups->dfl_cgrp->kn->id : 0;
	if (per_process)
		slice->tgid = next->pid ? next->tgid : 0;
	return 0;
}

/* A thread exits; when it is the last of its process (signal->live has just dropped to 0),
 * the process's entry goes, so the map holds live processes only. Exists in every kernel with
 * tp_btf (the 6.18 group_dead argument is not needed). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_process_exit, struct task_struct *task)
{
	if (!per_process)
		return 0;
	if (task->signal->live.counter)
		return 0;
	__u32 tgid = task->tgid;
	bpf_map_delete_elem(&process_counters, &tgid);
	return 0;
}

/* Page-cache hits without fentry (this kernel has no BPF trampolines): filemap_get_pages
 * reports the page range each read() step asked for, after the pages were found or read in.
 * Pages of that range the task has not counted yet are accesses; the pages this task added to
 * the cache since (readahead or synchronous reads) are misses; the rest are hits. The state is
 * task-local storage, freed by the kernel when the task exits. */
struct read_cursor {
	__u64 mapping;           /* address_space of the last range counted */
	__u64 index;             /* first page of that range */
	__u64 last_index;        /* last page of that range */
	__u64 pending_additions; /* pages this task added and no read has consumed yet */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct read_cursor);
} read_cursors SEC(".maps");

static __always_inline __u64 folio_pages(struct folio *folio)
{
	unsigned long flags = 0;
	/* page->flags is the first word of a folio in every layout (memdesc_flags_t or long). */
	bpf_probe_read_kernel(&flags, sizeof(flags), folio);
	if (!(flags & (1UL << bpf_core_enum_value(enum pageflags, PG_head))))
		return 1;
	if (!bpf_core_field_exists(folio->_flags_1))
		return 1;
	return 1ULL << (BPF_CORE_READ(folio, _flags_1) & 0xff);
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(on_page_cache_add, struct folio *folio)
{
	__u64 pages = folio_pages(folio);
	COUNT_CURRENT(page_cache_additions, pages);
	struct read_cursor *cur = bpf_task_storage_get(&read_cursors, bpf_get_current_task_btf(), 0,
						       BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (cur)
		cur->pending_additions += pages;
	return 0;
}

SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(on_filemap_get_pages, struct address_space *mapping, unsigned long index,
	     unsigned long last_index)
{
	struct read_cursor *cur = bpf_task_storage_get(&read_cursors, bpf_get_current_task_btf(), 0,
						       BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!cur || last_index < index)
		return 0;
	/* filemap_read serves one large read in batches and reports the rest of the range again
	 * after each batch, with the start moved forward: count only pages not counted yet. */
	__u64 first = index;
	bool continuation = cur->mapping == (__u64)mapping && index > cur->index &&
			    index <= cur->last_index;
	if (continuation)
		first = cur->last_index + 1;
	cur->mapping = (__u64)mapping;
	cur->index = index;
	if (!continuation || last_index > cur->last_index)
		cur->last_index = last_index;
	if (first > last_index)
		return 0;
	__u64 accessed = last_index - first + 1;
	__u64 missed = cur->pending_additions < accessed ? cur->pending_additions : accessed;
	cur->pending_additions -= missed;
	if (accessed == missed)
		return 0;
	COUNT_CURRENT(page_cache_hits, accessed - missed);
	return 0;
}

/* A bio submitted to a block device, traced once per bio (the kernel flags it). Stacked
 * bio-based devices (device mapper, md) resubmit clones to the disks below: counting only
 * request-based (blk-mq) devices counts each byte once, at the bottom of the stack. */
SEC("tp_btf/block_bio_queue")
int BPF_PROG(on_block_bio_queue, struct bio *bio)
{
	if (!BPF_CORE_READ(bio, bi_bdev, bd_disk, queue, mq_ops))
		return 0;
	__u32 op = BPF_CORE_READ(bio, bi_opf) & REQ_OP_MASK;
	if (op != REQ_OP_READ && op != REQ_OP_WRITE)
		return 0;
	__u64 bytes = BPF_CORE_READ(bio, bi_iter.bi_size);
	if (op == REQ_OP_WRITE)
		COUNT_CURRENT(disk_write_bytes, bytes);
	else
		COUNT_CURRENT(disk_read_bytes, bytes);
	return 0;
}

static __always_inline bool is_inet(struct sock *sk)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	return family == AF_INET || family == AF_INET6;
}

/* Socket payload moved by a send/recv system call (sock_sendmsg/sock_recvmsg), in the calling
 * task's context: no softirq guessing, and loopback counts like any other peer. */
SEC("tp_btf/sock_send_length")
int BPF_PROG(on_sock_send_length, struct sock *sk, int ret, int flags)
{
	if (ret <= 0 || !is_inet(sk))
		return 0;
	COUNT_CURRENT(net_tx_bytes, ret);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(on_sock_recv_length, struct sock *sk, int ret, int flags)
{
	if (ret <= 0 || (flags & MSG_PEEK) || !is_inet(sk))
		return 0;
	COUNT_CURRENT(net_rx_bytes, ret);
	return 0;
}
