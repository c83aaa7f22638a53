//! Streamed objects: the read-only objects of the `planned` policy.
//!
//! A streamed object has a master copy in pinned host memory and, while it
//! is resident, a device copy in the streaming arena's chunks (`super::arena`)
//! or, when it is larger than a chunk, in a pool slot of its own; either way
//! it counts against the budget with everything else the pool holds. Evicting it frees the slot —
//! nothing is written back once the object is sealed — and bringing it back
//! is an asynchronous copy on the copy stream, which the compute stream waits
//! for with an event only when an operation declares the object. With the
//! look-ahead of [`super::plan`], the next objects are fetched while the
//! current operation computes (GPUswap's transfers in the background, with
//! MemHC's look-ahead over a known order), and the victim is the object
//! needed farthest ahead (Belady).
//!
//! An object not yet sealed (a key being generated on the device) may have
//! been written by a kernel since it was fetched; it is written back to its
//! master, synchronously, before its slot is freed.

mod evict;
mod fetch;
mod lifecycle;
mod phase;
mod refusal;
#[cfg(test)]
pub(super) mod testing;
mod zero_copy;

pub(super) use evict::evictable_ahead;
pub use zero_copy::ZeroCopy;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::arena::Arena;
use super::eviction::Uses;
use crate::{AllocationId, DevicePtr, MemoryClass};

/// A streamed object as the residency manager tracks it.
#[derive(Debug)]
pub(super) struct StreamedEntry {
    pub(super) class: MemoryClass,
    pub(super) bytes: u64,
    /// The master's host address.
    master: u64,
    /// Shared with the buffer: the slot's address, 0 when not resident.
    slot: Arc<AtomicU64>,
    pub(super) device: Option<DevicePtr>,
    /// The master holds the object's data (it was written back once).
    master_valid: bool,
    /// No more writes will come ([`Residency::seal`](super::Residency::seal)).
    sealed: bool,
    /// The device copy may be newer than the master.
    dirty: bool,
    /// The compute stream already waits for the last fetch.
    awaited: bool,
    /// The device copy lies in the streaming arena (else in a pool slot of
    /// its own).
    pub(super) in_arena: bool,
    /// No device copy: kernels read the pinned master in place, over PCIe
    /// (`device` is then the master's device address; see
    /// [`Residency::zero_copy`](super::Residency::zero_copy)).
    pub(super) zero_copy: bool,
    /// The use mark of the last operation that declared the object since
    /// it was made resident (`u64::MAX`: unknown, wait for everything).
    last_use: Option<u64>,
    pub(super) pins: u32,
    uses: Uses,
}

/// The streamed part of the residency manager's state.
#[derive(Debug, Default)]
pub(super) struct StreamedState {
    /// Every streamed object by id. FNV, not SipHash: the look-ahead looks
    /// objects up thousands of times a bootstrap, and SipHash was 31 % of
    /// its host time (docs/BENCHMARKS.md, ninth session); ids are not
    /// attacker-chosen.
    pub(super) entries: fnv::FnvHashMap<AllocationId, StreamedEntry>,
    /// Bytes of resident streamed objects.
    pub(super) resident: u64,
    /// The chunks streamed objects are placed in (their bytes are in the
    /// pool's), and bytes of resident objects in pool slots of their own.
    pub(super) arena: Arena,
    pub(super) outside: u64,
    /// The most pool bytes seen in use by anything but streamed objects:
    /// what the look-ahead leaves free for temporaries and ciphertexts.
    pub(super) others_peak: u64,
    /// Objects fetched ahead of use, and of those, fetched bytes.
    pub(super) prefetched: u64,
    pub(super) prefetched_bytes: u64,
    /// How the last recording was split (stable set, largest step, bytes
    /// its simulation fetches per run), and the floor: what Belady's demand
    /// schedule fetches per run in the room the budget leaves beside the
    /// others' peak ([`super::plan::Recording::floor_bytes`]).
    pub(super) choice: super::plan::StableChoice,
    pub(super) floor_bytes: u64,
    /// Fetches for use served in place from pinned masters (zero-copy),
    /// and their bytes.
    pub(super) zero_copy_uses: u64,
    pub(super) zero_copy_bytes: u64,
    /// Times the pool refused although the accounting had room
    /// (fragmentation, frees not yet reached), and the room the look-ahead
    /// leaves free on their account: each refusal widens it.
    pub(super) refusals: u64,
    pub(super) refusal_headroom: u64,
    /// Arena chunks added and given back, and the bytes of the resident
    /// objects that giving chunks back evicted.
    pub(super) chunks_added: u64,
    pub(super) chunks_released: u64,
    pub(super) released_bytes: u64,
    /// Refusals since the pool last placed a request.
    pub(super) refusal_streak: u32,
    /// Requests placed after 1, 2 and 3 or more refusals in a row: what
    /// the trim, the wait for the streams and the evictions resolved.
    pub(super) resolved_after: [u64; 3],
    /// The last timed run that followed its plan, as the device measured
    /// it.
    pub(super) measured: Option<phase::MeasuredRun>,
}

impl StreamedState {
    /// Bytes of resident objects in the arena's chunks (the rest of the
    /// resident ones have pool slots of their own).
    pub(super) fn arena_resident(&self) -> u64 {
        self.resident.saturating_sub(self.outside)
    }
}
