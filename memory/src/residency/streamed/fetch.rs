//! Fetching streamed objects: a place in the arena or a pool slot of its
//! own, the copy from the pinned master, and the look-ahead's fetches along
//! the recorded order.

use std::sync::atomic::Ordering;

use super::super::Residency;
use super::super::state::State;
use crate::statistics::Traffic;
use crate::{AllocationId, DevicePtr, Result};

/// Steps of the recorded order that the look-ahead fetches into.
pub(in crate::residency) const WINDOW: usize = super::super::plan::LOOK_AHEAD;

impl Residency {
    /// Makes `id` resident: evicts victims until its bytes fit under
    /// `limit` pool bytes (only victims needed after `beyond` steps, if
    /// given), takes a slot and queues the fetch. `Ok(false)` when it cannot
    /// be made to fit.
    pub(in crate::residency) fn fetch_streamed(
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

    /// A pool slot of its own for `id` (an object too large for the arena's
    /// chunks, or every object without the arena): evicts victims until its
    /// bytes fit under `limit` pool bytes, then asks the pool, escalating
    /// its refusals. `None` when it cannot be made to fit.
    pub(super) fn own_slot(
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

    /// The streamed part of [`Residency::prepare`]: records the step, makes
    /// the declared objects resident (pinned by the caller), orders the
    /// compute stream after their fetches, then fetches ahead along the
    /// recorded order. `Ok(false)` when the declared objects cannot fit.
    pub(in crate::residency) fn prepare_streamed(
        &self,
        s: &mut State,
        touched: &[AllocationId],
    ) -> Result<bool> {
        let timing = s.planner.timing();
        if timing {
            // The step before ends here, before this one's waits.
            self.driver.step_ended()?;
        }
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
        if timing {
            self.driver.step_started()?;
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
}

#[cfg(test)]
mod tests {
    use super::super::super::driver::mock::Call;
    use super::super::testing::{MIB, fetched, id, manager, object};
    use crate::{Error, MemoryClass, Placement};
    use std::sync::atomic::Ordering;

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
    fn the_look_ahead_fetches_the_next_objects_before_they_are_declared() {
        let (r, d, _) = manager(64 * MIB);
        for n in 1..=4 {
            object(&r, n, MIB);
        }
        let steps = [1, 2, 3, 4];
        for _ in 0..2 {
            r.begin_phase(7, 1);
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
        r.begin_phase(7, 1);
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
