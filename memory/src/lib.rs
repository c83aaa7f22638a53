//! Memory for hemem: every polynomial buffer carries a [`MemoryClass`], and an
//! allocator composed from small resources and adaptors (in the manner of RAPIDS
//! RMM) decides where it lives — host, the GPU's stream-ordered pool, managed
//! memory or pinned host memory — keeps it under a device budget and keeps
//! statistics per class and placement.
//!
//! The layers, read outside-in:
//!
//! * [`Allocator`] — the handle the rest of hemem holds: `allocate(class, bytes)`
//!   returns an owning [`Buffer`] that gives its memory back on drop; it also
//!   moves data (`upload`, `download`, `copy`, `zero`) and takes operations'
//!   declarations of the buffers they touch (`prepare`).
//! * adaptors — [`TraceAdaptor`] (the allocation trace), [`StatisticsAdaptor`]
//!   (counters), [`BudgetAdaptor`] (the device budget, evicting through the
//!   [`Residency`] manager) — wrap an upstream [`MemoryResource`].
//! * the [`Router`] asks a [`policy::PlacementPolicy`] where a request goes;
//!   the resources ([`HostResource`], [`DevicePoolResource`],
//!   [`ManagedResource`], [`PinnedHostResource`], [`StreamedResource`]) own
//!   one placement each.
//!
//! # The budget, counted in one place
//!
//! Device-resident bytes have one ledger, the [`Residency`] manager's, with
//! one formula ([`ResidencyUsage::device_bytes`]) and one test of whether
//! more fit. The [`BudgetAdaptor`] is the only layer of the chain that
//! admits or refuses bytes, as RMM's `limiting_resource_adaptor` is: it asks
//! the upstream where a request will go ([`MemoryResource::placement`]),
//! reserves pooled bytes before forwarding, gives them back on a refusal or
//! a free, records what the pool really holds ([`MemoryResource::held_bytes`])
//! and admits managed blocks that must count from the start (a block handed
//! out with its pages on the device, a constant table); a
//! refusal is [`Error::OverBudget`] with the bytes in use per class and
//! placement. The resources only allocate and free (the managed and
//! streamed ones register their blocks with the manager, which counts
//! nothing). Managed buffers count when the manager makes them resident
//! (an operation's declaration, [`Allocator::prepare`]), streamed objects
//! when it fetches their device copies; both admissions go through the
//! same test. Freed managed blocks kept with their pages on the device (a
//! cache for reuse, frees the GPU has not reached) count as well, and are
//! freed before any live buffer is evicted.
//! * [`cuda`] — the GPU handle ([`GpuDevice`]) and the only code that calls the
//!   driver. cudarc loads libcuda at run time, so this crate builds and its
//!   CPU tests run without CUDA; every GPU entry point returns
//!   [`DeviceError::NoGpu`] where the driver is missing.
//!
//! Buffers that hold secret-key material are requested as *sensitive*; their
//! memory is zeroed before it is reused or released, in every placement and
//! cache, and so is the pinned staging an upload of one went through. A
//! zeroing that fails is returned by [`Allocator::release`], or — for a
//! buffer dropped instead — by the allocator's next fallible call
//! ([`Allocator::check`]) as [`Error::ZeroingFailed`]; the block is then
//! kept out of reuse.
//!
//! # Streaming (the `planned` policy)
//!
//! Switching keys and bootstrapping diagonals are written once and then only
//! read: under [`policy::PlannedPolicy`] (the default) they are
//! [`Placement::Streamed`] — a master copy in pinned host memory and, while
//! the [`Residency`] manager keeps it there, a copy in a pool slot. A phase of
//! repeating work ([`Allocator::phase`], opened by the bootstrapper) is
//! recorded once; on its later runs a stable set stays resident and the rest
//! is fetched ahead of use on the copy stream, the compute stream waiting on
//! an event only when an operation declares the object. Nothing is managed,
//! so a real small card behaves as an emulated budget does.
//!
//! # Eviction
//!
//! Under a device budget the [`Residency`] manager evicts managed buffers
//! that no operation holds. Bootstrapping touches its keys and diagonals in
//! the same order every time, and least recently used evicts, in such a
//! cycle, exactly the buffer needed soonest, so a larger budget buys
//! nothing. [`Eviction::PredictedNextUse`] predicts each buffer's next use
//! from its reuse intervals and evicts the farthest: a stable part of the
//! cycle stays resident and fewer bytes cross PCIe. On the H200 it was
//! nevertheless slower than least recently used (a budgeted run is bound by
//! host-blocking advice calls, which wait longest on just-used buffers), so
//! the default is [`Eviction::LeastRecentlyUsed`];
//! `--eviction` / `HEMEM_EVICTION` choose either. [`residency::eviction`]
//! weighs the alternatives and records the measurements; its tests simulate
//! both orders against Belady's.
//!
//! ```
//! use hemem_memory::{Allocator, BudgetSetting, MemoryClass, MemoryConfig, Placement};
//!
//! // The CPU backend's allocator; a GPU one is `Allocator::gpu(&device, &config)`.
//! let allocator = Allocator::host();
//! let mut ct = allocator.allocate(MemoryClass::Ciphertext, 8 * 1024)?;
//! allocator.upload(&mut ct, 0, &[1, 2, 3])?;
//! let mut back = [0u64; 3];
//! allocator.download(&ct, 0, &mut back)?;
//! assert_eq!((back, ct.placement()), ([1, 2, 3], Placement::Host));
//!
//! // Settings come from the API, or from HEMEM_* variables where a program
//! // asks for them (`MemoryConfig::from_env()`, parsed once).
//! let config = MemoryConfig {
//!     budget: "4GiB".parse::<BudgetSetting>()?,
//!     ..MemoryConfig::default()
//! };
//! assert_eq!(config.resolve_budget(8 << 30)?, 4 << 30);
//! assert!(config.resolve_budget(2 << 30).is_err()); // larger than the card
//! # Ok::<(), hemem_memory::Error>(())
//! ```
#![deny(unsafe_code)]

pub mod adaptors;
mod allocator;
mod buffer;
mod class;
mod config;
#[allow(unsafe_code)]
pub mod cuda;
mod error;
pub mod host;
pub mod policy;
pub mod residency;
mod resource;
pub mod resources;
mod statistics;
pub mod trace;

pub use adaptors::{
    BudgetAdaptor, CachingAdaptor, ReplayCheckAdaptor, StatisticsAdaptor, TraceAdaptor, TraceHandle,
};
pub use allocator::{Allocator, PhaseGuard};
pub use buffer::Buffer;
pub use class::{MemoryClass, Placement};
pub use config::{
    BudgetSetting, ByteSize, MemoryConfig, Oversubscription, PolicyConfig, ProfiledConfig,
};
pub use cuda::{DependentLaunch, GpuDevice, PoolActivity, PoolKind};
pub use error::{
    ConfigError, DeviceError, DriverVersion, Error, InUse, Result, TraceError, TraceFault,
};
pub use policy::{PlacementPolicy, PolicyKind};
pub use residency::{
    DriverTime, Eviction, Residency, ResidencyGuard, ResidencyUsage, StreamingPlan, StreamingTrace,
    ZeroCopy,
};
pub use resource::{
    AllocRequest, Allocation, AllocationId, DeviceMemory, DevicePtr, Memory, MemoryResource,
    StreamId, StreamedMemory,
};
pub use resources::{
    DevicePoolResource, HostResource, ManagedResource, PinnedHostResource, Router, StreamedResource,
};
pub use statistics::{ClassStatistics, Counter, Statistics, StatisticsHandle, StatisticsScope};
#[cfg(feature = "test-utils")]
pub mod testing;
