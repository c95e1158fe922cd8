//! The workload's integration tests: one binary, so that the dependencies are linked once,
//! with a module per area named as the file it was
//! (`cargo test -p greenpipe-workload --test integration <module>::`).

mod common;

mod engines;
mod models;
mod oip_wire;
mod served;
