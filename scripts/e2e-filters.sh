# Sourced, not run: the end-to-end tests (greenpipe-tests' integration binary) that
# scripts/test.sh runs outside its main `cargo test` run, as libtest filters. One list per
# group, shared by test.sh, test-arm.sh and test-backends.sh so the groups are named once.
# shellcheck shell=bash disable=SC2034 # the sourcing scripts use them

# Ignored in a plain `cargo test`: they need the aarch64 cross builds (scripts/test-arm.sh).
arm_e2e=(arm_exporter_qemu_user:: arm_vm:: arm_workload_qemu_user::)
# Ignored: they need Prometheus 3, Thanos and Mimir built from Go source (scripts/backends.sh).
backend_e2e=(remote_write_v2:: otlp_prometheus3:: multi_tenant_backends::)
# Ignored: they read the whole host's load, so they run alone, after everything else.
whole_host_e2e=(quickstart:: campaign::ci_plan_end_to_end_with_the_closed_loop_meter)
# Not ignored, but run in a lane of their own beside the main run: the two closed-loop
# recalibration tests take one at a time (their swinging loads would disturb each other: a
# mutex in recalibration.rs) and five minutes together, so in the main run at two threads one
# thread did little else while the other waited on that mutex.
closed_loop_e2e=(
  recalibration::a_noisy_unchanged_meter_never_triggers_a_refit
  recalibration::drift_is_detected_refitted_once_and_swapped_without_a_gap
)
