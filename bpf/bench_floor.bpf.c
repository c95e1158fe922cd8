// SPDX-License-Identifier: GPL-2.0
/* Benchmark fixture, never loaded by the exporter: the floor under the cost of our sched_switch
 * program on this machine. An empty tp_btf program is the dispatch cost alone; one that only
 * reads the clock adds bpf_ktime_get_ns, which a VM's paravirtual clock can make expensive. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_empty, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_ktime, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return bpf_ktime_get_ns() == 0;
}
