//! The CUDA layer: the only module of hemem-memory that calls the driver
//! (through cudarc's `sys`, `result` and `safe` layers), and the only one
//! allowed `unsafe`.
//!
//! * [`GpuDevice`] — one GPU: its context, a compute stream and a copy
//!   stream, what the device can do, and event helpers for ordering work
//!   between the streams.
//! * `pool`, `managed`, `pinned` — the driver calls behind the three device
//!   placements (the page-mapped pool, `cuMemCreate` / `cuMemMap`, or
//!   `cuMemPoolCreate` / `cuMemAllocFromPoolAsync`,
//!   `cuMemAllocManaged` / `cuMemAdvise` / `cuMemPrefetchAsync`,
//!   `cuMemHostAlloc`).
//! * `transfer` — uploads through pinned staging, downloads, device copies
//!   and zeroing, all ordered on a buffer's own stream.
//! * [`DependentLaunch`] — whether kernels start during the previous
//!   kernel's last wave (programmatic dependent launch, Hopper and newer).
//! * [`cupti`] — CUPTI's unified-memory counters, the independent check the
//!   GPU tests use, and its kernel records, summed by [`timeline`] into a
//!   run's busy and idle device time.
//!
//! cudarc loads libcuda at run time and panics when it is missing: every
//! entry point here first asks [`driver_present`] and returns
//! [`crate::DeviceError::NoGpu`] instead.

pub mod cupti;
mod dependent_launch;
mod device;
mod managed;
mod pinned;
mod pool;
mod probe;
pub mod timeline;
mod transfer;

pub use cudarc;
pub use dependent_launch::DependentLaunch;
pub use device::{ComputeCapability, DeviceInfo, Event, GpuDevice, MemoryInfo};
pub(crate) use managed::Location;
pub use pinned::PinnedBlock;
pub(crate) use pinned::{PinnedArena, PinnedStore};
pub(crate) use pool::{Pool, PoolAllocError};
pub use pool::{PoolActivity, PoolKind};
pub use probe::driver_present;
