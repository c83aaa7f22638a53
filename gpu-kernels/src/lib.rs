//! hemem's GPU kernels: CUDA C sources in `cuda/`, compiled to PTX committed in
//! `ptx/` (by `regenerate-ptx.sh`, with the pinned nvcc from PyPI; CI checks
//! the PTX is fresh), embedded here, and typed launchers over `hemem-memory`
//! buffers.
//!
//! Building needs no CUDA toolkit and running needs only the NVIDIA driver,
//! which JIT-compiles the PTX (ISA 9.0, `sm_75` and newer; CUDA 13.0 driver
//! R580 or newer) for the card. The CKKS modules also come compiled for
//! `sm_90` (`ptx/sm90/`), where every kernel opens with programmatic
//! dependent launch's wait: on Hopper and newer cards they are loaded
//! instead and launched with `cuLaunchKernelEx`'s programmatic-serialization
//! attribute (`hemem_memory::DependentLaunch`, `HEMEM_DEPENDENT_LAUNCH`).
//!
//! * [`Kernels`] loads the CKKS modules once per context; [`TestKernels`]
//!   loads the test and micro-benchmark modules, for tests and
//!   `hemem bench alloc` only.
//! * [`launch`] has one `unsafe fn …_async` per kernel (what it cannot check
//!   is in its `# Safety`) and safe wrappers that launch on a buffer's own
//!   stream.
//! * [`DeviceWords`] / [`DeviceWordsMut`] are the typed device views the
//!   launchers take.
//!
//! The CKKS kernels (`cuda/ckks_*.cu`) are the GPU backend's: NTT,
//! element-wise arithmetic, base conversion, key-switch inner products,
//! seeded uniform generation and compact-diagonal expansion. Apart from
//! them, and never loaded into a CKKS context, are the memory system's test
//! kernels: buffer touch and verify for the GPU tests, and the allocation
//! micro-benchmark's random addition and 8-point butterfly over randomly
//! permuted 4 KiB chunks. Dependencies point one way: `memory` ←
//! `gpu-kernels` ← `ckks`.
#![deny(unsafe_code)]

mod error;
mod kernels;
#[allow(unsafe_code)]
pub mod launch;
mod pattern;
mod views;

pub use error::{Error, Result};
pub use hemem_memory as memory;
pub use kernels::{Kernels, PTX_MODULES, PTX_MODULES_SM90, TEST_PTX_MODULES, TestKernels};
pub use pattern::{pattern_word, permutation};
pub use views::{DeviceWords, DeviceWordsMut};
