//! greenpipe-litert's integration tests: one binary, so that the dependencies are linked once,
//! with a module per area named as the file it was
//! (`cargo test -p greenpipe-litert --test integration <module>::`).

mod common;

mod convert;
mod threads;
