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

use std::cmp::Reverse;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Residency;
use super::arena::Arena;
use super::eviction::Uses;
use super::plan::StreamingPlan;
use super::state::State;
use crate::statistics::Traffic;
use crate::{AllocationId, DevicePtr, MemoryClass, Result};

/// Steps of the recorded order that the look-ahead fetches into.
pub(super) const WINDOW: usize = super::plan::LOOK_AHEAD;

/// When the `planned` policy lets kernels read a streamed object in place
/// from its pinned master (zero-copy) instead of a device copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ZeroCopy {
    /// Never: an object that cannot get device room is `OverBudget`.
    Off,
    /// Only when no device room can be made for an object an operation
    /// needs now (the default).
    #[default]
    Fallback,
    /// Also every object the look-ahead streams (not in its stable set),
    /// at every use: no copies, every read over PCIe. For measuring the
    /// placement against fetching.
    Streaming,
}

impl ZeroCopy {
    /// Every mode.
    pub const ALL: [Self; 3] = [Self::Off, Self::Fallback, Self::Streaming];

    /// The mode's name (`HEMEM_ZERO_COPY`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Fallback => "fallback",
            Self::Streaming => "streaming",
        }
    }
}

impl std::str::FromStr for ZeroCopy {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s.trim())
            .ok_or_else(|| {
                crate::ConfigError::InvalidSetting {
                    name: "HEMEM_ZERO_COPY",
                    value: s.to_owned(),
                }
                .into()
            })
    }
}

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
    /// No more writes will come ([`Residency::seal`]).
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
    /// [`Residency::zero_copy`]).
    pub(super) zero_copy: bool,
    /// The use mark of the last operation that declared the object since
    /// it was made resident (`u64::MAX`: unknown, wait for everything).
    last_use: Option<u64>,
    pub(super) pins: u32,
    uses: Uses,
}

impl StreamedEntry {
    /// Forgets the in-place mapping of an object read from its master
    /// (work already queued keeps the address it was given).
    fn unmap(&mut self) {
        self.zero_copy = false;
        self.device = None;
        self.slot.store(0, Ordering::Release);
    }
}

impl StreamedState {
    /// Bytes of resident objects in the arena's chunks (the rest of the
    /// resident ones have pool slots of their own).
    pub(super) fn arena_resident(&self) -> u64 {
        self.resident.saturating_sub(self.outside)
    }
}

/// The streamed part of the residency manager's state.
#[derive(Debug, Default)]
pub(super) struct StreamedState {
    pub(super) entries: std::collections::HashMap<AllocationId, StreamedEntry>,
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
    /// Refusals since the pool last placed a request.
    pub(super) refusal_streak: u32,
    /// Requests placed after 1, 2 and 3 or more refusals in a row: what
    /// the trim, the wait for the streams and the evictions resolved.
    pub(super) resolved_after: [u64; 3],
}

impl StreamedState {
    /// The pool placed a request: ends a run of refusals.
    pub(super) fn placed(&mut self) {
        let streak = self.refusal_streak as usize;
        if let Some(slot) = streak
            .checked_sub(1)
            .and_then(|i| self.resolved_after.get_mut(i.min(2)))
        {
            *slot += 1;
        }
        self.refusal_streak = 0;
    }
}

impl Residency {
    /// Starts tracking a streamed object (not resident; its master holds
    /// nothing yet).
    pub(crate) fn register_streamed(
        &self,
        id: AllocationId,
        class: MemoryClass,
        bytes: u64,
        master: u64,
        slot: Arc<AtomicU64>,
    ) {
        let mut s = self.lock();
        s.streamed.entries.insert(
            id,
            StreamedEntry {
                class,
                bytes,
                master,
                slot,
                device: None,
                master_valid: false,
                sealed: false,
                dirty: false,
                awaited: true,
                in_arena: false,
                zero_copy: false,
                last_use: None,
                pins: 0,
                uses: Uses::default(),
            },
        );
    }

    /// Stops tracking a streamed object that is being freed: its slot is
    /// freed after the work queued so far, and the compute stream is ordered
    /// after its last fetch (its master may be handed out again).
    pub(crate) fn unregister_streamed(&self, id: AllocationId) {
        let mut s = self.lock();
        let Some(entry) = s.streamed.entries.remove(&id) else {
            return;
        };
        if entry.zero_copy {
            return;
        }
        if let Some(slot) = entry.device {
            let awaited = if entry.awaited {
                Ok(())
            } else {
                self.driver.await_fetch(id)
            };
            let result = awaited.and_then(|()| self.driver.begin());
            if entry.in_arena {
                // The range is reused only by copies queued after `begin`;
                // if that failed, it is not reused at all.
                self.driver.forget_fetch(id);
                if result.is_ok() {
                    s.streamed.arena.release(slot, entry.bytes);
                }
            } else {
                if result.is_ok() {
                    self.driver.free_slot(id, slot, entry.bytes);
                }
                s.pool_used = s.pool_used.saturating_sub(entry.bytes);
                s.streamed.outside = s.streamed.outside.saturating_sub(entry.bytes);
            }
            s.streamed.resident = s.streamed.resident.saturating_sub(entry.bytes);
        }
    }

    /// Declares that a streamed object will not be written again: from now
    /// on evicting it writes nothing back. A resident copy newer than the
    /// master is copied back now, on the copy stream (a key just made on the
    /// device), so that no later eviction waits for it.
    ///
    /// # Errors
    /// Driver errors of that copy.
    pub fn seal(&self, id: AllocationId) -> Result<()> {
        let mut s = self.lock();
        let Some(e) = s.streamed.entries.get_mut(&id) else {
            return Ok(());
        };
        e.sealed = true;
        if e.zero_copy {
            return Ok(());
        }
        if let (Some(slot), true) = (e.device, e.dirty) {
            self.driver.write_back_async(e.master, slot, e.bytes)?;
            e.master_valid = true;
            e.dirty = false;
            self.statistics
                .record_traffic(e.class, Traffic::WriteBack(e.bytes));
        }
        Ok(())
    }

    /// Records that a streamed object's device copy was written (an upload
    /// or a copy into it): it is written back before its slot is freed.
    pub(crate) fn written(&self, id: AllocationId) {
        if let Some(e) = self.lock().streamed.entries.get_mut(&id) {
            e.dirty = e.device.is_some() && !e.zero_copy;
        }
    }

    /// Records that words were written into a streamed object's master
    /// (an upload): it holds the object's data from now on. Returns whether
    /// the object is resident (its device copy needs the words too).
    pub(crate) fn master_written(&self, id: AllocationId) -> bool {
        match self.lock().streamed.entries.get_mut(&id) {
            Some(e) => {
                e.master_valid = true;
                e.device.is_some() && !e.zero_copy
            }
            None => false,
        }
    }

    /// Ends an operation's claim on `ids` (its [`super::ResidencyGuard`]
    /// drops once its kernels are queued): the streamed objects among them
    /// get a use mark, which their eviction waits for.
    pub(super) fn end_use(&self, ids: &[AllocationId]) {
        let mut s = self.lock();
        super::guard::unpin(&mut s, ids);
        if !ids.iter().any(|id| s.streamed.entries.contains_key(id)) {
            return;
        }
        // Without a mark, an eviction waits for all compute work instead.
        let mark = self.driver.mark_use().unwrap_or(u64::MAX);
        for id in ids {
            if let Some(e) = s.streamed.entries.get_mut(id) {
                e.last_use = Some(mark);
            }
        }
    }

    /// Starts a phase of work named `key` (see [`super::plan`]).
    pub fn begin_phase(&self, key: u64) {
        self.lock().planner.begin(key);
    }

    /// Ends the phase begun last. A new recording gets its stable set for
    /// the room the budget leaves streamed objects (the budget less the
    /// peak of everything else and a margin).
    pub fn end_phase(&self) {
        let mut s = self.lock();
        let capacity = Self::streamed_capacity(&s);
        let room = s.budget.saturating_sub(s.streamed.others_peak);
        let reserve = s.streaming_reserve;
        let slack = s.streaming_slack;
        let plan = s.streaming_plan;
        let State {
            planner, streamed, ..
        } = &mut *s;
        if let Some(recording) = planner.end() {
            let entries = &streamed.entries;
            let size = |id| entries.get(&id).map(|e: &StreamedEntry| e.bytes);
            streamed.choice = match plan {
                StreamingPlan::Window => recording.choose_stable(size, capacity, reserve, slack),
                StreamingPlan::Belady => recording.choose_belady(size, capacity, reserve),
            };
            streamed.floor_bytes = recording.floor_bytes(size, room);
        }
    }

    /// Sets how many of the largest step's bytes the stable set leaves for
    /// streaming (see [`super::plan`]; default 2: one step in use, the next
    /// arriving).
    pub fn set_streaming_reserve(&self, steps: f64) {
        self.lock().streaming_reserve = steps;
    }

    /// How many more bytes than the fewest the window split may plan to
    /// move for more streaming room (see `Recording::choose_stable`;
    /// default 0).
    pub fn set_streaming_slack(&self, slack: f64) {
        self.lock().streaming_slack = slack.max(0.0);
    }

    /// How a new recording is split into what stays and what streams (see
    /// [`StreamingPlan`]).
    pub fn set_streaming_plan(&self, plan: StreamingPlan) {
        self.lock().streaming_plan = plan;
    }

    /// When kernels may read streamed objects in place (see [`ZeroCopy`]).
    pub fn set_zero_copy(&self, mode: ZeroCopy) {
        self.lock().zero_copy = mode;
    }

    /// Whether streamed objects share the chunks of an arena of their own
    /// (the default; see `arena`) or take a pool slot each, beside the
    /// temporaries (for comparison).
    pub fn set_streaming_arena(&self, on: bool) {
        self.lock().streaming_arena = on;
    }

    /// Sets the margin the look-ahead leaves free: 1/`divisor` of the
    /// budget (default 32).
    pub fn set_streaming_margin(&self, divisor: u64) {
        self.lock().streaming_margin = divisor.max(1);
    }

    /// Pool bytes the look-ahead may fill with streamed objects: the budget
    /// less the peak of everything else, a margin (1/`streaming_margin` of
    /// the budget) for the pool's fragmentation, and what refusals of the
    /// pool have shown it needs more. (Measured on the H100, FGb at 2 GiB,
    /// with the objects in pool slots beside the temporaries: with 1/32 the
    /// pool refused 456 requests in seven bootstraps and the waits made them
    /// 76–136 ms; with 1/16, 340 refusals and 65–69 ms, although 1.6 GB
    /// streamed per bootstrap instead of 1.0–1.2 GB. The arena keeps the
    /// objects out of the temporaries' way; see `arena`.)
    pub(super) fn streamed_capacity(s: &State) -> u64 {
        let margin = s.budget / s.streaming_margin.max(1);
        let headroom = s.streamed.others_peak + margin + s.streamed.refusal_headroom;
        s.budget.saturating_sub(headroom)
    }

    /// Frees the slot of a resident streamed object, writing it back first
    /// when it may have been written. The copy stream, which fetches into a
    /// freed range and frees slots, first waits for the compute work up to
    /// the object's last use — not for everything queued since: the host
    /// runs ahead of the device, and waiting for all of it would let a
    /// fetch start only one operation before its use.
    pub(super) fn evict_streamed(&self, s: &mut State, id: AllocationId) -> Result<()> {
        let Some(e) = s.streamed.entries.get_mut(&id) else {
            return Ok(());
        };
        let Some(slot) = e.device else {
            return Ok(());
        };
        if e.zero_copy {
            // Nothing on the device to free or write back: the next use
            // tries for a device copy again.
            e.unmap();
            return Ok(());
        }
        if e.dirty || !e.sealed {
            self.driver.write_back(e.master, slot, e.bytes)?;
            e.master_valid = true;
            e.dirty = false;
            self.statistics
                .record_traffic(e.class, Traffic::WriteBack(e.bytes));
        }
        if let Some(mark) = e.last_use.take() {
            self.driver.wait_for_use(mark)?;
        }
        e.slot.store(0, Ordering::Release);
        e.device = None;
        e.awaited = true;
        let (class, bytes, in_arena) = (e.class, e.bytes, e.in_arena);
        e.in_arena = false;
        if in_arena {
            self.driver.forget_fetch(id);
            s.streamed.arena.release(slot, bytes);
        } else {
            self.driver.free_slot(id, slot, bytes);
            s.pool_used = s.pool_used.saturating_sub(bytes);
            s.streamed.outside = s.streamed.outside.saturating_sub(bytes);
        }
        s.streamed.resident = s.streamed.resident.saturating_sub(bytes);
        self.statistics.record_traffic(class, Traffic::Dropped);
        Ok(())
    }

    /// The resident, unpinned streamed object to evict first: a streaming
    /// object before a stable one, then the one the look-ahead needs
    /// farthest ahead (never again first), or without a look-ahead the least
    /// recently used. With `beyond` (fetching ahead), only streaming objects
    /// needed more than `beyond` steps ahead qualify. With `in_arena`, only
    /// objects in the arena (`true`) or in pool slots of their own (`false`).
    pub(super) fn streamed_victim(
        s: &State,
        beyond: Option<usize>,
        in_arena: Option<bool>,
    ) -> Option<AllocationId> {
        s.streamed
            .entries
            .iter()
            .filter(|(_, e)| e.device.is_some() && !e.zero_copy && e.pins == 0)
            .filter(|(_, e)| in_arena.is_none_or(|a| e.in_arena == a))
            .map(|(id, e)| {
                let next = s.planner.next_use(*id).unwrap_or(usize::MAX);
                let stable = s.planner.is_stable(*id);
                (id, !stable, next, e.uses.last())
            })
            .filter(|&(_, streaming, next, _)| evictable_ahead(beyond, !streaming, next))
            .max_by_key(|&(id, streaming, next, last)| {
                (streaming, next, Reverse(last), Reverse(*id))
            })
            .map(|(id, ..)| *id)
    }

    /// Makes `id` resident: evicts victims until its bytes fit under
    /// `limit` pool bytes (only victims needed after `beyond` steps, if
    /// given), takes a slot and queues the fetch. `Ok(false)` when it cannot
    /// be made to fit.
    pub(super) fn fetch_streamed(
        &self,
        s: &mut State,
        id: AllocationId,
        limit: u64,
        beyond: Option<usize>,
    ) -> Result<bool> {
        let Some(bytes) = s.streamed.entries.get(&id).map(|e| e.bytes) else {
            return Ok(true);
        };
        if Self::read_in_place(s, id) {
            return match beyond {
                None => self.zero_copy(s, id),
                Some(_) => Ok(true),
            };
        }
        let placed = if s.streaming_arena {
            self.place_in_arena(s, id, bytes, limit, beyond)?
        } else {
            None
        };
        let slot = match placed {
            Some(slot) => slot,
            None if beyond.is_some() && s.streaming_arena => return Ok(false),
            None => match self.own_slot(s, id, bytes, limit, beyond)? {
                Some(slot) => slot,
                None if beyond.is_none() => return self.zero_copy(s, id),
                None => return Ok(false),
            },
        };
        let Some(e) = s.streamed.entries.get_mut(&id) else {
            return Ok(false);
        };
        if e.master_valid {
            self.driver.fetch(id, slot, e.master, bytes)?;
            e.awaited = false;
            self.statistics
                .record_traffic(e.class, Traffic::Fetch(bytes));
        }
        e.slot.store(slot.0, Ordering::Release);
        e.device = Some(slot);
        s.streamed.resident = s.streamed.resident.saturating_add(bytes);
        if beyond.is_some() {
            s.streamed.prefetched += 1;
            s.streamed.prefetched_bytes += bytes;
        }
        s.note_peak();
        Ok(true)
    }

    /// Whether `id` is read in place by choice: [`ZeroCopy::Streaming`],
    /// while the look-ahead follows a recording that streams it.
    fn read_in_place(s: &State, id: AllocationId) -> bool {
        s.zero_copy == ZeroCopy::Streaming
            && s.planner.next_use(id).is_some()
            && !s.planner.is_stable(id)
    }

    /// Serves `id` in place from its pinned master for this use (zero-copy)
    /// when no device room can be made for it: the declared objects of one
    /// operation and the pool's fragmentation can leave a fetch for use no
    /// room although the budget's accounting has it (FVb at 2 GiB: 1.25 GB
    /// of key-switch temporaries beside a 78 MB key). Kernels then read the
    /// master over PCIe (the same bytes a copy would move, but only once
    /// the kernel runs and at the link's speed), and the object takes no
    /// device memory; at its next use it tries for a device copy again. The
    /// hybrid runtime's paper and GPUswap place cold data in host memory
    /// the same way. `Ok(false)` where the device cannot map host memory or
    /// the master holds no data yet.
    fn zero_copy(&self, s: &mut State, id: AllocationId) -> Result<bool> {
        let Some(e) = s.streamed.entries.get_mut(&id) else {
            return Ok(false);
        };
        if !e.master_valid || !e.sealed || s.zero_copy == ZeroCopy::Off {
            return Ok(false);
        }
        let Some(mapped) = self.driver.map_master(e.master)? else {
            return Ok(false);
        };
        e.zero_copy = true;
        e.awaited = true;
        e.device = Some(mapped);
        e.slot.store(mapped.0, Ordering::Release);
        s.streamed.zero_copy_uses += 1;
        s.streamed.zero_copy_bytes = s.streamed.zero_copy_bytes.saturating_add(e.bytes);
        Ok(true)
    }

    /// A pool slot of its own for `id` (an object too large for the arena's
    /// chunks, or every object without the arena): evicts victims until its
    /// bytes fit under `limit` pool bytes, then asks the pool, escalating
    /// its refusals. `None` when it cannot be made to fit.
    fn own_slot(
        &self,
        s: &mut State,
        id: AllocationId,
        bytes: u64,
        limit: u64,
        beyond: Option<usize>,
    ) -> Result<Option<DevicePtr>> {
        while s.pool_used.saturating_add(bytes) > limit {
            if !self.free_pool_bytes(s, beyond)? {
                return Ok(None);
            }
        }
        let mut attempts = 0;
        let slot = loop {
            if let Some(slot) = self.driver.allocate_slot(id, bytes)? {
                break slot;
            }
            // The pool is full although the accounting has room. Fetching
            // ahead stops there; a fetch for use escalates (see
            // `escalate`) until nothing is left to evict.
            if beyond.is_some() {
                return Ok(None);
            }
            attempts += 1;
            if !self.escalate(s, attempts, bytes)? {
                return Ok(None);
            }
        };
        s.streamed.placed();
        s.pool_used = s.pool_used.saturating_add(bytes);
        s.streamed.outside = s.streamed.outside.saturating_add(bytes);
        if let Some(e) = s.streamed.entries.get_mut(&id) {
            e.in_arena = false;
        }
        Ok(Some(slot))
    }

    /// Gives pool bytes back by evicting one object held in a pool slot of
    /// its own (the farthest needed; with `beyond`, only one needed later)
    /// or, failing that and not fetching ahead, by emptying and freeing an
    /// arena chunk. `Ok(false)` when neither is possible.
    pub(super) fn free_pool_bytes(&self, s: &mut State, beyond: Option<usize>) -> Result<bool> {
        if let Some(victim) = Self::streamed_victim(s, beyond, Some(false)) {
            self.evict_streamed(s, victim)?;
            return Ok(true);
        }
        if beyond.is_some() {
            return Ok(false);
        }
        self.release_chunk(s)
    }

    /// The streamed part of [`Residency::prepare`]: records the step, makes
    /// the declared objects resident (pinned by the caller), orders the
    /// compute stream after their fetches, then fetches ahead along the
    /// recorded order. `Ok(false)` when the declared objects cannot fit.
    pub(super) fn prepare_streamed(&self, s: &mut State, touched: &[AllocationId]) -> Result<bool> {
        let following = s.planner.step(touched);
        let budget = s.budget;
        // An object served in place at its last use tries for a device copy
        // again (work already queued keeps the address it was given).
        for &id in touched {
            if let Some(e) = s.streamed.entries.get_mut(&id).filter(|e| e.zero_copy) {
                e.unmap();
            }
        }
        for &id in touched {
            if s.streamed
                .entries
                .get(&id)
                .is_some_and(|e| e.device.is_none())
                && !self.fetch_streamed(s, id, budget, None)?
            {
                return Ok(false);
            }
        }
        for &id in touched {
            s.clock += 1;
            let clock = s.clock;
            let Some(e) = s.streamed.entries.get_mut(&id) else {
                continue;
            };
            e.uses.record(clock);
            if !e.sealed {
                e.dirty = true;
            }
            if !e.awaited {
                self.driver.await_fetch(id)?;
                e.awaited = true;
            }
        }
        if following {
            // Leave room for what the rest of the work allocates besides the
            // streamed objects (its peak so far) and a margin for the pool's
            // rounding.
            let limit = Self::streamed_capacity(s);
            for (id, distance) in s.planner.upcoming(WINDOW) {
                if s.streamed
                    .entries
                    .get(&id)
                    .is_none_or(|e| e.device.is_some())
                {
                    continue;
                }
                if !self.fetch_streamed(s, id, limit, Some(distance))? {
                    break;
                }
            }
        }
        Ok(true)
    }

    /// What a refusal of the pool (it could not place `bytes` although the
    /// accounting had room) leads to, by how many came in a row: first the
    /// pool gives back the chunks it holds unused (its free memory may lie
    /// in chunks too small for the request); then the streams are waited for
    /// too (frees not reached yet: the host runs ahead of the device);
    /// from the third on, streamed objects of `bytes` leave first, and the
    /// look-ahead leaves a little more room from then on. `Ok(false)` when
    /// nothing is left to try.
    fn escalate(&self, s: &mut State, streak: u32, bytes: u64) -> Result<bool> {
        s.streamed.refusals += 1;
        if streak >= 3 {
            let step = bytes.min(s.budget / 64);
            s.streamed.refusal_headroom = (s.streamed.refusal_headroom + step).min(s.budget / 16);
            let held = s.pool_used;
            while held.saturating_sub(s.pool_used) < bytes {
                if !self.free_pool_bytes(s, None)? {
                    break;
                }
            }
            if s.pool_used == held && streak > 3 {
                return Ok(false);
            }
        }
        if streak >= 2 {
            self.driver.synchronize()?;
        }
        let held = self.driver.trim_pool(s.pool_used)?;
        s.pool_reserved = held;
        Ok(true)
    }

    /// Evicts streamed objects no operation holds until `extra` more pool
    /// bytes fit under the budget; with `out_of_memory` (the pool refused
    /// although the accounting had room), evicts at least `extra` bytes, or
    /// waits for the streams when nothing is left to evict. Returns whether
    /// anything changed.
    pub(super) fn relieve_streamed(
        &self,
        s: &mut State,
        extra: u64,
        out_of_memory: bool,
    ) -> Result<bool> {
        if out_of_memory {
            s.streamed.refusal_streak += 1;
            let streak = s.streamed.refusal_streak;
            return self.escalate(s, streak, extra);
        }
        while s.over(extra, 0) {
            if !self.free_pool_bytes(s, None)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Whether an unpinned resident object may leave to make room: always for
/// an object needed now (`beyond` is `None`), and when fetching ahead
/// `beyond` steps, only an object the plan does not keep (`kept`) whose
/// next use is later than that (`next`, in steps).
pub(super) fn evictable_ahead(beyond: Option<usize>, kept: bool, next: usize) -> bool {
    beyond.is_none_or(|b| !kept && next > b)
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::driver::mock::{Call, RecordingDriver, ZERO_COPY_BASE};
    use super::*;
    use crate::statistics::StatisticsHandle;
    use crate::{Error, Placement};

    const MIB: u64 = 1 << 20;

    /// A manager whose streamed objects take a pool slot each (the arena's
    /// placement has its own tests, in `arena`; the decisions here are the
    /// same with it).
    fn manager(budget: u64) -> (Arc<Residency>, RecordingDriver, StatisticsHandle) {
        manager_with_arena(budget, false)
    }

    /// A manager with streamed objects in the arena (`arena`) or in a pool
    /// slot each.
    pub(in crate::residency) fn manager_with_arena(
        budget: u64,
        arena: bool,
    ) -> (Arc<Residency>, RecordingDriver, StatisticsHandle) {
        let (r, driver, stats) =
            super::super::testing::manager_with(budget, true, crate::Eviction::LeastRecentlyUsed);
        r.set_streaming_arena(arena);
        (r, driver, stats)
    }

    fn id(n: u64) -> AllocationId {
        AllocationId(n)
    }

    /// Registers object `n` (master address `n`) and makes its master hold
    /// data, as a loaded key's does, sealed.
    pub(in crate::residency) fn object(r: &Residency, n: u64, bytes: u64) -> Arc<AtomicU64> {
        let slot = Arc::new(AtomicU64::new(0));
        r.register_streamed(
            id(n),
            MemoryClass::EvaluationKey,
            bytes,
            n,
            Arc::clone(&slot),
        );
        r.lock()
            .streamed
            .entries
            .get_mut(&id(n))
            .expect("registered")
            .master_valid = true;
        r.seal(id(n)).expect("sealed");
        slot
    }

    fn fetched(calls: &[Call]) -> Vec<u64> {
        calls
            .iter()
            .filter_map(|c| match c {
                Call::Fetch(n) => Some(*n),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_declared_object_is_fetched_awaited_and_its_slot_published() {
        let (r, d, stats) = manager(4 * MIB);
        let slot = object(&r, 1, MIB);
        assert_eq!(slot.load(Ordering::Acquire), 0);
        let g = r.prepare(&[id(1)]).expect("fits");
        assert_eq!(
            d.take(),
            vec![Call::Slot(1), Call::Fetch(1), Call::Await(1)]
        );
        assert_eq!(slot.load(Ordering::Acquire), 2 << 32);
        assert_eq!(g.ids(), &[id(1)]);
        drop(g);
        // Resident and awaited: nothing more to do.
        drop(r.prepare(&[id(1)]).expect("resident"));
        assert_eq!(d.take(), vec![]);
        let usage = r.usage();
        assert_eq!((usage.pool_used, usage.streamed_resident), (MIB, MIB));
        assert_eq!(
            r.in_use()
                .get(MemoryClass::EvaluationKey, Placement::Streamed),
            MIB
        );
        let s = stats.snapshot();
        let cell = s.get(MemoryClass::EvaluationKey, Placement::Streamed);
        assert_eq!(cell.prefetched_to_device, MIB);
        // Freeing it frees the slot after the work queued so far.
        r.unregister_streamed(id(1));
        assert_eq!(d.take(), vec![Call::Begin, Call::FreeSlot(1)]);
        assert_eq!(r.usage().pool_used, 0);
    }

    #[test]
    fn without_a_recording_the_least_recently_used_leaves_and_nothing_is_written_back() {
        let (r, d, stats) = manager(3 * MIB);
        for n in 1..=4 {
            object(&r, n, MIB);
        }
        for n in [1, 2, 3, 1] {
            drop(r.prepare(&[id(n)]).expect("fits"));
        }
        d.take();
        let g = r.prepare(&[id(4)]).expect("evicts 2");
        // The copy stream waits for the compute work up to 2's last use
        // (the second operation's mark), not for everything queued.
        assert_eq!(
            d.take(),
            vec![
                Call::WaitUse(1),
                Call::FreeSlot(2),
                Call::Slot(4),
                Call::Fetch(4),
                Call::Await(4)
            ]
        );
        // 4 is held: the declared pair must evict 3 and 1 (4 stays).
        let g2 = r.prepare(&[id(2), id(3)]).expect("fits");
        assert_eq!(
            d.take(),
            vec![
                Call::WaitUse(3),
                Call::FreeSlot(1),
                Call::Slot(2),
                Call::Fetch(2),
                Call::Await(2)
            ]
        );
        drop((g, g2));
        let s = stats.snapshot();
        let cell = s.get(MemoryClass::EvaluationKey, Placement::Streamed);
        assert_eq!((cell.evictions, cell.prefetched_to_host), (2, 0));
    }

    #[test]
    fn an_unsealed_object_is_written_back_once_and_then_fetched_from_its_master() {
        let (r, d, _) = manager(MIB);
        for n in 1..=2 {
            r.register_streamed(
                id(n),
                MemoryClass::EvaluationKey,
                MIB,
                n,
                Arc::new(AtomicU64::new(0)),
            );
        }
        // A fresh object's master holds nothing: no copy, only a slot.
        drop(r.prepare(&[id(1)]).expect("fits"));
        assert_eq!(d.take(), vec![Call::Slot(1)]);
        drop(r.prepare(&[id(2)]).expect("evicts 1"));
        assert_eq!(
            d.take(),
            vec![
                Call::WriteBack(1),
                Call::WaitUse(0),
                Call::FreeSlot(1),
                Call::Slot(2)
            ]
        );
        // 2 was written before it was sealed: sealing copies it back at once,
        // on the copy stream; its eviction then writes nothing, and 1 comes
        // back from its master.
        r.seal(id(2)).expect("sealed");
        assert_eq!(d.take(), vec![Call::WriteBackAsync(2)]);
        r.seal(id(1)).expect("sealed");
        assert_eq!(d.take(), vec![], "1 is not resident: nothing to copy");
        drop(r.prepare(&[id(1)]).expect("evicts 2"));
        assert_eq!(
            d.take(),
            vec![
                Call::WaitUse(1),
                Call::FreeSlot(2),
                Call::Slot(1),
                Call::Fetch(1),
                Call::Await(1)
            ]
        );
        drop(r.prepare(&[id(2)]).expect("evicts 1"));
        let calls = d.take();
        assert!(
            !calls.iter().any(|c| matches!(c, Call::WriteBack(_))),
            "{calls:?}"
        );
    }

    #[test]
    fn an_object_without_device_room_is_read_in_place_and_tries_again_next_time() {
        let (r, d, _) = manager(2 * MIB);
        object(&r, 1, MIB);
        let slot = object(&r, 2, 2 * MIB);
        let held = r.prepare(&[id(1)]).expect("fits");
        d.take();
        // Object 1 is held and 2 needs the whole budget: 2 is served from
        // its pinned master (address 2 in the mock), with no copy.
        let in_place = r.prepare(&[id(2)]).expect("zero-copy");
        assert_eq!(d.take(), vec![Call::ZeroCopy(2)]);
        assert_eq!(slot.load(Ordering::Acquire), ZERO_COPY_BASE | 2);
        let usage = r.usage();
        assert_eq!((usage.zero_copy_uses, usage.zero_copy_bytes), (1, 2 * MIB));
        assert_eq!(usage.streamed_resident, MIB, "{usage:?}");
        assert_eq!(
            r.in_use()
                .get(MemoryClass::EvaluationKey, Placement::Streamed),
            MIB
        );
        drop(in_place);
        drop(held);
        // Next use, with 1 free to leave: a device copy after all.
        drop(r.prepare(&[id(2)]).expect("fits once 1 may leave"));
        let calls = d.take();
        assert!(calls.contains(&Call::Fetch(2)), "{calls:?}");
        assert_ne!(slot.load(Ordering::Acquire), ZERO_COPY_BASE | 2);
        assert_eq!(r.usage().zero_copy_uses, 1);
        // Freeing an object read in place frees nothing on the device.
        let (r, d, _) = manager(2 * MIB);
        object(&r, 1, MIB);
        object(&r, 2, 2 * MIB);
        let held = r.prepare(&[id(1)]).expect("fits");
        drop(r.prepare(&[id(2)]).expect("zero-copy"));
        d.take();
        r.unregister_streamed(id(2));
        assert_eq!(d.take(), vec![]);
        drop(held);
    }

    #[test]
    fn objects_larger_than_the_budget_are_a_typed_error_naming_their_bytes() {
        // Without host mapping there is no zero-copy to fall back on.
        let (r, d, _) = manager(2 * MIB);
        d.no_zero_copy.store(true, Ordering::Relaxed);
        object(&r, 1, MIB);
        object(&r, 2, 2 * MIB);
        let held = r.prepare(&[id(1)]).expect("fits");
        match r.prepare(&[id(2)]) {
            Err(Error::OverBudget {
                requested,
                placing,
                budget,
                ..
            }) => {
                assert_eq!((requested, budget), (2 * MIB, 2 * MIB));
                assert!(placing.is_some(), "a refusal says what it was placing");
            }
            other => panic!("expected OverBudget, got {other:?}"),
        }
        drop(held);
        // Nothing stays pinned by the failed call.
        drop(r.prepare(&[id(2)]).expect("fits once 1 may leave"));
    }

    #[test]
    fn a_full_pool_costs_a_trim_then_a_wait_then_evictions() {
        let (r, d, _) = manager(8 * MIB);
        object(&r, 1, MIB);
        object(&r, 2, MIB);
        drop(r.prepare(&[id(1)]).expect("fits"));
        d.take();
        // Refused once: the pool gives back what it holds unused.
        d.refuse_slots.store(1, Ordering::Relaxed);
        drop(r.prepare(&[id(2)]).expect("fits after a trim"));
        assert_eq!(
            d.take(),
            vec![
                Call::Trim(MIB),
                Call::Slot(2),
                Call::Fetch(2),
                Call::Await(2)
            ]
        );
        // Refused three times: a trim, a wait for the streams, an eviction.
        r.unregister_streamed(id(2));
        object(&r, 2, MIB);
        d.take();
        d.refuse_slots.store(3, Ordering::Relaxed);
        drop(r.prepare(&[id(2)]).expect("fits after an eviction"));
        assert_eq!(
            d.take(),
            vec![
                Call::Trim(MIB),
                Call::Synchronize,
                Call::Trim(MIB),
                Call::WaitUse(0),
                Call::FreeSlot(1),
                Call::Synchronize,
                Call::Trim(0),
                Call::Slot(2),
                Call::Fetch(2),
                Call::Await(2)
            ]
        );
        assert_eq!(r.usage().pool_refusals, 4);
        // Everything held and the pool refusing: read in place, or without
        // host mapping a typed error.
        object(&r, 3, MIB);
        let g = r.prepare(&[id(2)]).expect("resident");
        d.refuse_slots.store(10, Ordering::Relaxed);
        drop(r.prepare(&[id(3)]).expect("zero-copy"));
        assert_eq!(r.usage().zero_copy_uses, 1);
        d.refuse_slots.store(10, Ordering::Relaxed);
        d.no_zero_copy.store(true, Ordering::Relaxed);
        assert!(matches!(r.prepare(&[id(3)]), Err(Error::OverBudget { .. })));
        d.no_zero_copy.store(false, Ordering::Relaxed);
        drop(g);
        // Fetching ahead stops at a refusal: no trim, no wait, no eviction.
        d.refuse_slots.store(0, Ordering::Relaxed);
        d.take();
    }

    /// Bytes fetched over `runs` runs of a cyclic phase whose steps touch the
    /// objects `steps` (1 MiB each) under `budget`.
    fn cyclic(budget: u64, objects: u64, steps: &[u64], runs: usize) -> (u64, Vec<u64>) {
        let (r, d, stats) = manager(budget);
        for n in 1..=objects {
            object(&r, n, MIB);
        }
        let mut last = Vec::new();
        for run in 0..runs {
            r.begin_phase(42);
            for &n in steps {
                drop(r.prepare(&[id(n)]).expect("fits"));
            }
            r.end_phase();
            let calls = d.take();
            if run + 1 == runs {
                last = fetched(&calls);
            }
        }
        let s = stats.snapshot();
        let moved = s
            .get(MemoryClass::EvaluationKey, Placement::Streamed)
            .prefetched_to_device;
        (moved, last)
    }

    #[test]
    fn in_streaming_zero_copy_mode_the_streamed_objects_are_read_in_place() {
        // The cycle of the test below, with streaming objects read in place
        // once the recording exists: the steady state copies nothing, the
        // stable set stays resident, and the rest is mapped at every use.
        let (r, d, _) = manager(32 * MIB);
        r.set_zero_copy(ZeroCopy::Streaming);
        for n in 1..=40 {
            object(&r, n, MIB);
        }
        for _ in 0..3 {
            r.begin_phase(42);
            for n in 1..=40 {
                drop(r.prepare(&[id(n)]).expect("fits"));
            }
            r.end_phase();
        }
        d.take();
        r.begin_phase(42);
        for n in 1..=40 {
            let g = r.prepare(&[id(n)]).expect("fits");
            let usage = r.usage();
            assert!(usage.device_bytes() <= 32 * MIB, "{usage:?}");
            drop(g);
        }
        r.end_phase();
        let calls = d.take();
        let fetched = fetched(&calls);
        let mapped = calls
            .iter()
            .filter(|c| matches!(c, Call::ZeroCopy(_)))
            .count();
        assert!(fetched.is_empty(), "{calls:?}");
        let stable = r.usage().stable_bytes / MIB;
        assert!(stable >= 20, "{:?}", r.usage());
        // The streaming ones still resident from the copying runs are used
        // where they are; every other is mapped.
        let streaming = 40 - stable;
        assert!(
            (streaming - 3..=streaming).contains(&(mapped as u64)),
            "{mapped} of {streaming}: {calls:?}"
        );
    }

    #[test]
    fn following_the_recording_moves_close_to_what_belady_moves() {
        // Forty objects in a cycle; the budget leaves room for 30 (a 1/16
        // margin). Belady's demand schedule fetches n(n−k)/(n−1) = 10.3 a
        // run on average.
        let steps: Vec<u64> = (1..=40).collect();
        let budget = 32 * MIB;
        let (_, first) = cyclic(budget, 40, &steps, 1);
        assert_eq!(first.len(), 40, "the first run misses everything");
        let (moved, last) = cyclic(budget, 40, &steps, 5);
        let belady = 10;
        assert!(
            (belady..=belady * 6 / 5).contains(&last.len()),
            "steady state fetched {} objects a run: {last:?}",
            last.len()
        );
        // Least recently used would fetch all 40 every run: 200 MiB.
        assert!(moved < 100 * MIB, "{moved}");
    }

    #[test]
    fn the_look_ahead_fetches_the_next_objects_before_they_are_declared() {
        let (r, d, _) = manager(64 * MIB);
        for n in 1..=4 {
            object(&r, n, MIB);
        }
        let steps = [1, 2, 3, 4];
        for _ in 0..2 {
            r.begin_phase(7);
            for n in steps {
                drop(r.prepare(&[id(n)]).expect("fits"));
            }
            r.end_phase();
        }
        // Everything fits: after the first run nothing moves.
        d.take();
        // Evict all, then run again: the first declaration fetches its own
        // object and the look-ahead the other three, before they are
        // declared.
        for n in 1..=4 {
            r.unregister_streamed(id(n));
            object(&r, n, MIB);
        }
        d.take();
        r.begin_phase(7);
        drop(r.prepare(&[id(1)]).expect("fits"));
        let calls = d.take();
        assert_eq!(fetched(&calls), vec![1, 2, 3, 4], "{calls:?}");
        assert_eq!(
            calls.iter().filter(|c| matches!(c, Call::Await(_))).count(),
            1
        );
        drop(r.prepare(&[id(2)]).expect("resident"));
        assert_eq!(d.take(), vec![Call::Await(2)]);
        r.end_phase();
        assert_eq!(r.usage().prefetched, 3);
    }
}
