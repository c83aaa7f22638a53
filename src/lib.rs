//! hemem: CKKS homomorphic encryption on the CPU and on NVIDIA GPUs (PTX
//! kernels, chosen at run time), with a hybrid memory system that keeps
//! bootstrapping running when its working set is larger than the GPU.
//!
//! This facade re-exports the crates of the workspace:
//! [`ckks`] (parameters, encoding, keys, evaluator, backends),
//! [`memory`] (memory classes, allocators, statistics) and
//! [`bootstrap`]; [`prelude`] gathers what most programs need. Its own code
//! is the benchmark engines the `hemem bench` commands drive
//! ([`mod@bench`]), their PNG plots ([`plot`]) and the encrypted-inference
//! workload ([`inference`]). One error type, [`Error`], takes every error
//! the crates return (with `?`).
//!
//! ```
//! use hemem::prelude::*;
//!
//! # fn main() -> hemem::Result<()> {
//! let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)?;
//! // Defaults, whatever the environment says; `MemoryConfig::from_env()`
//! // opts in to the HEMEM_* variables.
//! let context = Context::with_memory(params.clone(), DeviceSelection::Cpu, &MemoryConfig::default())?;
//! let schedule = BootstrapSchedule::recommended(&params)?;
//! assert!(BootstrapKeys::planned_bytes(&schedule, &params)? > 0);
//! context.synchronize()?;
//! # Ok(())
//! # }
//! ```

pub mod bench;
mod error;
pub mod inference;
pub mod plot;

pub use error::{Error, Result, join_causes};
pub use hemem_bootstrap as bootstrap;
pub use hemem_ckks as ckks;
pub use hemem_memory as memory;

/// The types most programs need: the CKKS prelude ([`ckks::prelude`]:
/// context, [`MemoryConfig`](memory::MemoryConfig), keys, encryption,
/// evaluation, noise flooding, the serialization traits), polynomial
/// evaluation as an evaluator operation, and bootstrapping (on one device,
/// or spread over several).
pub mod prelude {
    pub use hemem_bootstrap::linear_transform::DiagonalStorage;
    pub use hemem_bootstrap::poly_eval::{EvaluatePolynomial, Polynomial};
    pub use hemem_bootstrap::schedule::{BootstrapSchedule, ScheduleChoice};
    pub use hemem_bootstrap::{BootstrapKeys, Bootstrapper, MultiBootstrapper};
    pub use hemem_ckks::prelude::*;
}

/// The README's examples, compiled and run as doctests so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
