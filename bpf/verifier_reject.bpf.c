// SPDX-License-Identifier: GPL-2.0
/* Test fixture, never loaded by the exporter: the accounting object's required program with a
 * bug the verifier must refuse (a hash-map value used without its NULL check). The exporter's tests
 * load it to check that a rejection is reported with the verifier's own words. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "greenpipe.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct running_slice);
} running SEC(".maps");

SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 zero = 0;
	struct running_slice *slice = bpf_map_lookup_elem(&running, &zero);
	slice->start_ns = bpf_ktime_get_ns();
	return 0;
}
