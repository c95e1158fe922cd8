//! The contract shared by the GreenPipe exporter, estimator and tests.
//!
//! Everything that two binaries must agree on lives here and only here: metric names and label
//! keys ([`names`]), the canonical feature set of the trace CSV format ([`features`]) and the
//! versioned model file ([`model`]). The crate does no I/O beyond (de)serialising strings, so it
//! can be unit-tested in isolation and used from any binary.
#![deny(missing_docs)]

pub mod features;
pub mod model;
pub mod names;
pub mod trace;
