//! The manager's state and the budget's arithmetic: device-resident bytes,
//! their peaks, whether more bytes fit, the per-class figures of a refusal,
//! and the plan of trims and evictions that makes room for more.
//!
//! This is the budget's one ledger and its one rule: [`device_bytes`] is
//! the only formula for device-resident bytes and [`State::over`] the only
//! test of whether more fit. Who writes to it:
//!
//! * pooled blocks — the [`BudgetAdaptor`](crate::BudgetAdaptor), alone
//!   (`Residency::reserve_pool`, `release_pool`, `observe_pool` for what the
//!   pool really holds), and a managed block handed out with its pages on
//!   the device, which the adaptor admits (`Residency::admit_managed`);
//! * managed residency — the manager's own decisions: an operation's
//!   declaration ([`Residency::prepare`](super::Residency::prepare)) brings
//!   buffers in, evictions take them out; the managed resource only
//!   registers and unregisters blocks;
//! * streamed objects' device copies (arena chunks, pool slots of their
//!   own) — the manager, as it fetches and evicts them;
//! * what the pool holds after a trim — the trim's report.

use fnv::FnvHashMap as HashMap;
use std::cmp::Reverse;

use super::batch::Action;
use super::eviction::Eviction;
use super::managed::Entry;
use super::plan::{Planner, StreamingPlan};
use super::streamed::{StreamedState, ZeroCopy};
use super::usage::DriverTime;
use crate::statistics::{StatisticsHandle, Traffic};
use crate::{AllocationId, Error, InUse, MemoryClass, Placement};

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) budget: u64,
    pub(super) eviction: Eviction,
    pub(super) pool_used: u64,
    pub(super) pool_reserved: u64,
    pub(super) pool_by_class: [u64; 6],
    pub(super) managed: HashMap<AllocationId, Entry>,
    pub(super) managed_resident: u64,
    /// Resident bytes of freed managed blocks the managed resource keeps
    /// (cached for reuse, or waiting for their free): reported by the
    /// budget adaptor, given back by [`Action::ReleaseKept`].
    pub(super) managed_kept: u64,
    /// The pool grows in chunks of this many bytes (0: by the byte): beside
    /// managed memory a pooled request is counted as the chunks it may add,
    /// before the pool adds them.
    pub(super) pool_granule: u64,
    pub(super) managed_allocated: u64,
    pub(super) clock: u64,
    pub(super) peak_device: u64,
    pub(super) driver_time: DriverTime,
    pub(super) streamed: StreamedState,
    pub(super) planner: Planner,
    /// Steps' worth of the largest step's bytes kept for streaming.
    pub(super) streaming_reserve: f64,
    /// How a recording is split into kept and streamed.
    pub(super) streaming_plan: StreamingPlan,
    /// How many items the running phase runs stage by stage (see
    /// [`StreamingPlan::Auto`]).
    pub(super) phase_items: usize,
    /// The peak of everything but streamed objects when the running phase
    /// began: what [`Residency::abandon_phase`](super::Residency::abandon_phase)
    /// restores.
    pub(super) phase_others_peak: u64,
    /// The plan the last recording was split with (`Auto` resolved).
    pub(super) split_plan: Option<StreamingPlan>,
    /// The window split may plan this much more than the fewest bytes for
    /// more streaming room.
    pub(super) streaming_slack: f64,
    /// Streamed objects share the arena's chunks (else a pool slot each).
    pub(super) streaming_arena: bool,
    /// The look-ahead leaves 1/`streaming_margin` of the budget free.
    pub(super) streaming_margin: u64,
    /// When kernels read streamed objects in place.
    pub(super) zero_copy: ZeroCopy,
}

/// Device-resident bytes: the pool's footprint (what it holds from the
/// device, at least its live bytes) plus the managed bytes made resident.
/// The one formula: the manager's peak and
/// [`ResidencyUsage::device_bytes`](super::ResidencyUsage::device_bytes)
/// both read it.
pub(super) fn device_bytes(pool_used: u64, pool_reserved: u64, managed_resident: u64) -> u64 {
    pool_reserved.max(pool_used) + managed_resident
}

/// Device bytes of managed memory: the resident bytes of live buffers and
/// those of freed blocks the managed resource keeps (cached for reuse, or
/// waiting for the GPU to reach their free).
fn managed_on_device(s: &State) -> u64 {
    s.managed_resident + s.managed_kept
}

impl State {
    pub(super) fn note_peak(&mut self) {
        let now = device_bytes(self.pool_used, self.pool_reserved, managed_on_device(self));
        self.peak_device = self.peak_device.max(now);
        let streamed = self.streamed.arena.bytes() + self.streamed.outside;
        let others = self.pool_used.saturating_sub(streamed);
        self.streamed.others_peak = self.streamed.others_peak.max(others);
    }

    /// Whether `extra_pool` more pooled bytes and `extra_managed` more
    /// resident managed bytes exceed the budget: the one decision of
    /// whether bytes fit, for every admission (the budget adaptor's, an
    /// operation's declaration, the streaming look-ahead's).
    ///
    /// The pool's maximum size is the budget, so with no managed memory
    /// (the `device` and `planned` policies) the driver itself keeps the
    /// footprint under it, and what the pool keeps cached is its to reuse:
    /// live bytes are what is checked (a pool that cannot place a request
    /// refuses it, and room is made then).
    ///
    /// Beside managed memory the pool's whole footprint counts, and a pooled
    /// request is counted as the worst it can do to that footprint: add its
    /// own bytes, in whole chunks, to what the pool holds. The pool's free
    /// room may not take it — fragmented between live blocks, or freed on a
    /// stream the GPU has not reached — and the driver then grows the pool
    /// without asking; counting only the chunks the live bytes need let FGb
    /// under `static` at 2 GiB peak 31.6 MiB over the budget (H100, fifth
    /// session, calls 17–20).
    pub(super) fn over(&self, extra_pool: u64, extra_managed: u64) -> bool {
        let pool = if self.managed.is_empty() {
            self.pool_used.saturating_add(extra_pool)
        } else {
            let chunks = |bytes: u64| match self.pool_granule {
                0 => bytes,
                granule => bytes.div_ceil(granule).saturating_mul(granule),
            };
            chunks(self.pool_reserved.max(self.pool_used)).saturating_add(chunks(extra_pool))
        };
        pool.saturating_add(managed_on_device(self))
            .saturating_add(extra_managed)
            > self.budget
    }

    /// The refusal of `requested` bytes of `placing`, with what the
    /// budget holds now.
    pub(super) fn over_budget(&self, requested: u64, placing: Option<MemoryClass>) -> Error {
        Error::OverBudget {
            requested,
            placing,
            budget: self.budget,
            in_use: Box::new(self.in_use()),
        }
    }

    pub(super) fn in_use(&self) -> InUse {
        let mut in_use = InUse::default();
        for class in MemoryClass::ALL {
            let pooled = self.pool_by_class.get(class.index()).copied().unwrap_or(0);
            in_use.set(class, Placement::DevicePool, pooled);
            let managed = self
                .managed
                .values()
                .filter(|e| e.class == class && e.resident)
                .map(|e| e.bytes)
                .sum();
            in_use.set(class, Placement::Managed, managed);
            let streamed = self
                .streamed
                .entries
                .values()
                .filter(|e| e.class == class && e.device.is_some() && !e.zero_copy)
                .map(|e| e.bytes)
                .sum();
            in_use.set(class, Placement::Streamed, streamed);
        }
        // Arena chunks count in the pool's live bytes; the objects in them
        // count as streamed above, their free room only here.
        let arena_free = self
            .streamed
            .arena
            .bytes()
            .saturating_sub(self.streamed.arena_resident());
        let cached = self.pool_reserved.saturating_sub(self.pool_used);
        in_use.set_held_free(arena_free, cached);
        in_use
    }

    /// Plans a trim and evictions so that the extra bytes fit; `false` when
    /// they cannot. The plan assumes the trim gives back everything the pool
    /// holds beyond its live bytes;
    /// [`Residency::settle`](super::Residency::settle) corrects for a pool
    /// that keeps more.
    pub(super) fn make_room(
        &mut self,
        extra_pool: u64,
        extra_managed: u64,
        actions: &mut Vec<Action>,
        statistics: &StatisticsHandle,
    ) -> bool {
        if !self.over(extra_pool, extra_managed) {
            return true;
        }
        if self.pool_reserved > self.pool_used {
            actions.push(Action::Trim {
                keep: self.pool_used,
            });
            self.pool_reserved = self.pool_used;
            statistics.record_trim();
        }
        // Freed managed blocks kept resident go before any live buffer.
        if self.managed_kept > 0 && self.over(extra_pool, extra_managed) {
            actions.push(Action::ReleaseKept);
            self.managed_kept = 0;
        }
        self.evict_until_fits(extra_pool, extra_managed, actions, statistics)
    }

    /// Plans evictions of unpinned resident buffers (never a constant
    /// table, which stays counted for its life), in the [`Eviction`] order,
    /// until the extra bytes fit; `false` when they cannot.
    pub(super) fn evict_until_fits(
        &mut self,
        extra_pool: u64,
        extra_managed: u64,
        actions: &mut Vec<Action>,
        statistics: &StatisticsHandle,
    ) -> bool {
        let (eviction, now) = (self.eviction, self.clock);
        while self.over(extra_pool, extra_managed) {
            // The longest expected wait first; ties: least recently used,
            // then the lowest id.
            let victim = self
                .managed
                .iter()
                .filter(|(_, e)| e.resident && e.pins == 0 && !e.fixed)
                .max_by_key(|(id, e)| {
                    (
                        e.uses.expected_wait(eviction, now),
                        Reverse(e.uses.last()),
                        Reverse(**id),
                    )
                })
                .map(|(id, _)| *id);
            let Some(id) = victim else {
                return false;
            };
            let Some(entry) = self.managed.get_mut(&id) else {
                return false;
            };
            let range = entry.range(id);
            if entry.read_mostly_set {
                actions.push(Action::ReadMostly { range, on: false });
                entry.read_mostly_set = false;
            }
            actions.push(Action::Prefetch {
                range,
                to_device: false,
            });
            entry.resident = false;
            let (class, bytes) = (entry.class, entry.bytes);
            self.managed_resident = self.managed_resident.saturating_sub(bytes);
            statistics.record_traffic(class, Traffic::Eviction(bytes));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::Eviction;
    use super::super::driver::mock::Call;
    use super::super::testing::{MIB, id, manager, manager_with, register};
    use crate::{Error, MemoryClass, Placement};

    #[test]
    fn least_recently_used_buffers_are_evicted_and_declared_ones_never() {
        let (r, d, stats) = manager_with(3 * MIB, true, Eviction::LeastRecentlyUsed);
        assert_eq!(r.eviction(), Eviction::LeastRecentlyUsed);
        for n in 1..=4 {
            register(&r, n, MemoryClass::Ciphertext, MIB);
        }
        // Buffers 1, 2, 3 fill the budget exactly.
        let g = r.prepare(&[id(1), id(2), id(3)]).expect("fits");
        drop(g);
        assert_eq!(
            d.take(),
            vec![
                Call::Begin,
                Call::ToDevice(1),
                Call::ToDevice(2),
                Call::ToDevice(3),
                Call::End
            ]
        );
        // Touching 1 again makes 2 the least recently used.
        drop(r.prepare(&[id(1)]).expect("resident"));
        assert_eq!(d.take(), vec![]);
        let g4 = r.prepare(&[id(4)]).expect("evicts 2");
        assert_eq!(
            d.take(),
            vec![Call::Begin, Call::ToHost(2), Call::ToDevice(4), Call::End]
        );
        // 4 is declared by a live guard: bringing 2 back must evict 3, then 1.
        let g2 = r.prepare(&[id(2), id(3)]).expect("evicts 1 only");
        assert_eq!(
            d.take(),
            vec![Call::Begin, Call::ToHost(1), Call::ToDevice(2), Call::End]
        );
        // Everything resident is now declared: nothing can make room for 1.
        let err = r.prepare(&[id(1)]).expect_err("over budget");
        assert!(matches!(err, Error::OverBudget { requested, budget, .. }
            if requested == MIB && budget == 3 * MIB));
        assert_eq!(d.take(), vec![]);
        drop((g4, g2));
        assert!(r.usage().device_bytes() <= 3 * MIB);
        assert_eq!(r.usage().peak_device, 3 * MIB);
        let s = stats.snapshot();
        let cell = s.get(MemoryClass::Ciphertext, Placement::Managed);
        assert_eq!(cell.evictions, 2);
        assert_eq!(cell.prefetched_to_host, 2 * MIB);
        // Only buffer 2 came back with data (the first fetches populate).
        assert_eq!(cell.prefetched_to_device, MIB);
    }

    #[test]
    fn predicted_next_use_evicts_the_farthest_reuse_and_declared_ones_never() {
        let (r, d, stats) = manager_with(3 * MIB, true, Eviction::PredictedNextUse);
        assert_eq!(r.eviction(), Eviction::PredictedNextUse);
        for n in 1..=4 {
            register(&r, n, MemoryClass::Ciphertext, MIB);
        }
        // Ticks 1, 2, 3: buffers 1, 2, 3 fill the budget exactly.
        drop(r.prepare(&[id(1), id(2), id(3)]).expect("fits"));
        d.take();
        // Tick 4: buffer 1 again, three ticks after its first use.
        drop(r.prepare(&[id(1)]).expect("resident"));
        // Buffer 1 is expected back at tick 7 (wait 3), buffers 2 and 3,
        // used once, by their ages (2 and 1): least recently used would
        // evict 2, this order evicts 1.
        let g4 = r.prepare(&[id(4)]).expect("evicts 1");
        assert_eq!(
            d.take(),
            vec![Call::Begin, Call::ToHost(1), Call::ToDevice(4), Call::End]
        );
        // Buffer 1 returns while 4 is declared by a live guard: of 2 and 3
        // (used once, ages 3 and 2), 2 leaves.
        let g1 = r.prepare(&[id(1)]).expect("evicts 2");
        assert_eq!(
            d.take(),
            vec![Call::Begin, Call::ToHost(2), Call::ToDevice(1), Call::End]
        );
        // 1 and 4 are held: 2 can only come back in place of 3.
        let g2 = r.prepare(&[id(2)]).expect("evicts 3");
        assert_eq!(
            d.take(),
            vec![Call::Begin, Call::ToHost(3), Call::ToDevice(2), Call::End]
        );
        // Everything resident is declared: nothing can make room for 3.
        assert!(matches!(
            r.prepare(&[id(3)]),
            Err(Error::OverBudget { requested, .. }) if requested == MIB
        ));
        assert_eq!(d.take(), vec![]);
        drop((g4, g1, g2));
        assert_eq!(r.usage().peak_device, 3 * MIB);
        let cell = stats
            .snapshot()
            .get(MemoryClass::Ciphertext, Placement::Managed);
        assert_eq!((cell.evictions, cell.prefetched_to_host), (3, 3 * MIB));
        // Buffers 1 and 2 came back with data.
        assert_eq!(cell.prefetched_to_device, 2 * MIB);
    }

    #[test]
    fn read_mostly_is_unset_before_eviction_and_set_again_on_return() {
        let (r, d, _) = manager(MIB, true);
        register(&r, 1, MemoryClass::EvaluationKey, MIB);
        register(&r, 2, MemoryClass::Ciphertext, MIB);
        drop(r.prepare(&[id(1)]).expect("fits"));
        assert_eq!(
            d.take(),
            vec![
                Call::Begin,
                Call::ReadMostly(1, true),
                Call::ToDevice(1),
                Call::End
            ]
        );
        drop(r.prepare(&[id(2)]).expect("evicts the key"));
        assert_eq!(
            d.take(),
            vec![
                Call::Begin,
                Call::ReadMostly(1, false),
                Call::ToHost(1),
                Call::ToDevice(2),
                Call::End
            ]
        );
        drop(r.prepare(&[id(1)]).expect("key returns"));
        assert_eq!(
            d.take(),
            vec![
                Call::Begin,
                Call::ToHost(2),
                Call::ReadMostly(1, true),
                Call::ToDevice(1),
                Call::End
            ]
        );
    }
}
