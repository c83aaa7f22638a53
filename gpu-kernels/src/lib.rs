//! hemem's GPU kernels: CUDA C sources in `cuda/`, compiled to PTX committed in
//! `ptx/`, and typed launchers over `hemem-memory` buffers.
//!
//! The kernel pipeline (PTX regeneration with a pinned nvcc and the CI
//! freshness check) arrives with the GPU memory system; until then this crate
//! only fixes its place in the dependency chain
//! `memory` ← `gpu-kernels` ← `ckks`.

pub use hemem_memory as memory;
