//! greenpipe-carbon's integration tests: one binary, so that the dependencies are linked once,
//! with a module per area named as the file it was
//! (`cargo test -p greenpipe-carbon --test integration <module>::`).

mod backtest_shared;
mod cli;
mod deploy_rules;
mod providers;
mod providers_fuzz;
