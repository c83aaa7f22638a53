//! The device budget and the residency manager.
//!
//! The budget is a virtual device capacity enforced on **device-resident
//! bytes**: what the pool holds (its live allocations, and the freed memory
//! it keeps because its release threshold is the maximum — the high-water
//! mark of live pooled bytes since the last trim, or what the pool reports
//! holding after an allocation or a trim when that is more, since it reserves
//! in chunks) plus the managed bytes this manager has made resident.
//!
//! The manager holds the budget's ledger (`state`); the
//! [`BudgetAdaptor`](crate::BudgetAdaptor) is the only layer of the
//! allocator's chain that writes pooled bytes to it and admits bytes at
//! allocation. The resources register what the manager must know for its
//! own work — managed blocks to prefetch and evict, streamed objects to
//! fetch — and registration counts nothing.
//!
//! Operations declare the managed buffers they touch ([`Residency::prepare`]).
//! Those that are not resident are brought to the device — prefetched on the
//! copy stream, except under the `managed` policy, which lets pages fault in
//! as plain Unified Memory does — and, to stay under the budget, the pool is
//! trimmed and then managed buffers that no current operation declared are
//! evicted (prefetched to the host), in the manager's [`Eviction`] order.
//! Buffers declared by an operation whose [`ResidencyGuard`] is alive are
//! never evicted.
//!
//! An eviction must really leave the device. A read-mostly buffer prefetched
//! to the host keeps its device replica (measured on the H200: 1 GiB came back
//! in 0.4 ms instead of 21 ms), so read-mostly advice is unset before such an
//! eviction and set again when the buffer returns.
//!
//! Under the `planned` policy the read-only objects are **streamed** instead
//! (`streamed`): a pinned host master, and while resident a place in the
//! streaming arena (`arena`: a few large pool chunks kept for them), fetched
//! ahead of use along the order [`plan`] records for each phase of work. The
//! pool's maximum size is the budget, so with no managed memory the budget
//! is checked on live pooled bytes and the driver caps the footprint.
//!
//! Every device operation goes through a [`ResidencyDriver`], so the
//! decisions can be checked on the CPU against a recording mock.
//!
//! # Eviction
//!
//! Least recently used evicts, in a cycle larger than the budget, exactly
//! the buffer the cycle needs soonest: a bootstrap's keys and diagonals then
//! all cross PCIe every bootstrap, whatever the budget.
//! [`Eviction::PredictedNextUse`] predicts each buffer's next use from its
//! reuse intervals and evicts the farthest (most recently used first within
//! a loop, reused-at-once buffers last, least recently used where nothing
//! repeats), so a larger budget keeps a stable part of the cycle resident
//! and the traffic per cycle falls. On the GPU it moved fewer bytes but took
//! longer (a budgeted run is bound by host-blocking advice calls, which wait
//! longest on just-used buffers; see [`DriverTime`]), so
//! [`Eviction::LeastRecentlyUsed`] is the default; [`eviction`] weighs the
//! alternatives and records the measurements.

mod arena;
mod batch;
pub(crate) mod driver;
pub mod eviction;
mod guard;
mod managed;
pub mod plan;
mod pool;
mod state;
mod streamed;
#[cfg(test)]
mod testing;
mod timing;
mod trace;
mod usage;
#[cfg(test)]
mod workloads;

pub(crate) use driver::GpuResidencyDriver;
#[cfg(test)]
pub(crate) use driver::NullDriver;
pub use driver::{ManagedRange, ResidencyDriver};
pub use eviction::Eviction;
pub use guard::ResidencyGuard;
pub use plan::StreamingPlan;
pub use streamed::ZeroCopy;
pub use timing::RunTimes;
pub use trace::StreamingTrace;
pub use usage::{DriverTime, ResidencyUsage};

use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::statistics::StatisticsHandle;
use crate::{Error, InUse, MemoryClass};
use state::State;

/// The residency manager of one allocator: the budget's accounting, the
/// managed buffers it tracks, and its decisions. Thread-safe.
pub struct Residency {
    state: Mutex<State>,
    driver: Box<dyn ResidencyDriver>,
    statistics: StatisticsHandle,
    prefetch_on_use: bool,
    /// Frees the blocks the managed resource keeps (set by the allocator).
    kept_release: std::sync::OnceLock<KeptRelease>,
}

/// What [`Residency::set_kept_release`] registers: frees the freed managed
/// blocks a resource keeps resident, and returns their bytes.
pub(crate) type KeptRelease = Box<dyn Fn() -> u64 + Send + Sync>;

impl fmt::Debug for Residency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Residency")
            .field("usage", &self.usage())
            .field("prefetch_on_use", &self.prefetch_on_use)
            .finish_non_exhaustive()
    }
}

impl Residency {
    /// A manager for `budget` bytes. `prefetch_on_use` is false under the
    /// `managed` policy (pages fault in instead); `eviction` orders the
    /// victims. Traffic, evictions and trims are counted in `statistics`.
    pub fn new(
        budget: u64,
        prefetch_on_use: bool,
        eviction: Eviction,
        driver: Box<dyn ResidencyDriver>,
        statistics: StatisticsHandle,
    ) -> Self {
        Self {
            state: Mutex::new(State {
                budget,
                eviction,
                streaming_reserve: 2.0,
                streaming_slack: 0.0,
                streaming_arena: true,
                streaming_margin: 32,
                ..State::default()
            }),
            driver,
            statistics,
            prefetch_on_use,
            kept_release: std::sync::OnceLock::new(),
        }
    }

    /// Registers how freed managed blocks kept resident (a cache for reuse,
    /// frees the GPU has not reached) are given back when the budget needs
    /// their room: before any live buffer is evicted. Once; later calls are
    /// ignored.
    pub(crate) fn set_kept_release(&self, release: KeptRelease) {
        let _ = self.kept_release.set(release);
    }

    /// Counts pooled bytes beside managed memory as the `granule`-byte
    /// chunks the pool grows by (the allocator: the driver's 32 MiB), so
    /// that a growth of the pool cannot take the device past the budget
    /// before it is observed.
    pub(crate) fn set_pool_granule(&self, granule: u64) {
        self.lock().pool_granule = granule;
    }

    /// The resident bytes of the freed managed blocks kept now (the budget
    /// adaptor, after each managed allocation and free): they count against
    /// the budget like live ones.
    pub(crate) fn observe_managed_kept(&self, bytes: u64) {
        let mut s = self.lock();
        s.managed_kept = bytes;
        // A free keeps its pages on the device: past the budget, the kept
        // blocks go at once (the resource calls nothing here while it holds
        // its own lock, so the release cannot wait on this one).
        if bytes > 0
            && s.over(0, 0)
            && let Some(release) = self.kept_release.get()
        {
            release();
            s.managed_kept = 0;
        }
        s.note_peak();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The budget in bytes.
    pub fn budget(&self) -> u64 {
        self.lock().budget
    }

    /// The order in which victims are evicted.
    pub fn eviction(&self) -> Eviction {
        self.lock().eviction
    }

    /// Device-resident bytes per class and placement.
    pub fn in_use(&self) -> InUse {
        self.lock().in_use()
    }

    /// The error for a request of `requested` bytes of `class` that cannot
    /// fit.
    pub(crate) fn over_budget(&self, requested: u64, class: MemoryClass) -> Error {
        self.lock().over_budget(requested, Some(class))
    }
}
