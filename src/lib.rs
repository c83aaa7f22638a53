//! hemem: CKKS homomorphic encryption that runs on the CPU and (in later
//! issues) on NVIDIA GPUs, with a hybrid memory system.
//!
//! This facade re-exports the crates of the workspace:
//! [`ckks`] (parameters, encoding, keys, evaluator, backends),
//! [`memory`] (memory classes, allocators, statistics) and
//! [`bootstrap`]. Its own code is the benchmark engines the `hemem bench`
//! commands drive ([`mod@bench`]), their PNG plots ([`plot`]) and the
//! encrypted-inference workload ([`inference`]).

pub mod bench;
mod error;
pub mod inference;
pub mod plot;

pub use error::{Error, Result};
pub use hemem_bootstrap as bootstrap;
pub use hemem_ckks as ckks;
pub use hemem_memory as memory;

pub use hemem_ckks::prelude;

/// The README's examples, compiled and run as doctests so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
