//! The end-to-end tests: one binary, so that the dependencies are linked once,
//! with a module per area named as the file it was
//! (`cargo test -p greenpipe-tests --test integration <module>::`).
//! The `arm_*` and backend modules and the quick start's test are ignored unless asked for
//! (`-- --ignored`): scripts/test-arm.sh and scripts/test-backends.sh run the first once what
//! they need is built, scripts/test.sh the quick start's alone on the host.

mod arm_exporter_qemu_user;
mod arm_vm;
mod arm_workload_qemu_user;
mod bundled_profiles;
mod campaign;
mod campaign_k8s;
mod carbon_placement_k8s;
mod deploy_applied_k8s;
mod deploy_manifests;
mod ebpf_container_scraped;
mod energy_per_inference_rule;
mod estimator_faults;
mod estimator_fleet;
mod estimator_serve;
mod estimator_tenant_headers;
mod exporter_cgroup;
mod exporter_lifecycle;
mod exporter_push;
mod exporter_scraped;
mod fuzz_targets_replay;
mod gpu_attribution;
mod helm_k8s;
mod meter_scraped;
mod multi_tenant_backends;
mod offline_pipeline;
mod otlp_prometheus3;
mod promql_live;
mod quickstart;
mod recalibration;
mod remote_write_v2;
mod view_tmux;
mod web_tls;
mod workload_cgroup;
