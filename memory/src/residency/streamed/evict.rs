//! Eviction of streamed objects: the victim (a streaming object before a
//! stable one, then the farthest needed), freeing its slot after its last
//! use, and giving pool bytes back.

use std::cmp::Reverse;
use std::sync::atomic::Ordering;

use super::super::Residency;
use super::super::state::State;
use crate::statistics::Traffic;
use crate::{AllocationId, Result};

impl Residency {
    /// Frees the slot of a resident streamed object, writing it back first
    /// when it may have been written. The copy stream, which fetches into a
    /// freed range and frees slots, first waits for the compute work up to
    /// the object's last use — not for everything queued since: the host
    /// runs ahead of the device, and waiting for all of it would let a
    /// fetch start only one operation before its use.
    pub(in crate::residency) fn evict_streamed(
        &self,
        s: &mut State,
        id: AllocationId,
    ) -> Result<()> {
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
    pub(in crate::residency) fn streamed_victim(
        s: &State,
        beyond: Option<usize>,
        in_arena: Option<bool>,
    ) -> Option<AllocationId> {
        let ahead = s.planner.look_ahead();
        s.streamed
            .entries
            .iter()
            .filter(|(_, e)| e.device.is_some() && !e.zero_copy && e.pins == 0)
            .filter(|(_, e)| in_arena.is_none_or(|a| e.in_arena == a))
            .map(|(id, e)| {
                let next = ahead.and_then(|a| a.next_use(*id)).unwrap_or(usize::MAX);
                let stable = ahead.is_some_and(|a| a.keeps(*id));
                (id, !stable, next, e.uses.last())
            })
            .filter(|&(_, streaming, next, _)| evictable_ahead(beyond, !streaming, next))
            .max_by_key(|&(id, streaming, next, last)| {
                (streaming, next, Reverse(last), Reverse(*id))
            })
            .map(|(id, ..)| *id)
    }

    /// Gives pool bytes back by evicting one object held in a pool slot of
    /// its own (the farthest needed; with `beyond`, only one needed later)
    /// or, failing that and not fetching ahead, by emptying and freeing an
    /// arena chunk. `Ok(false)` when neither is possible.
    pub(in crate::residency) fn free_pool_bytes(
        &self,
        s: &mut State,
        beyond: Option<usize>,
    ) -> Result<bool> {
        if let Some(victim) = Self::streamed_victim(s, beyond, Some(false)) {
            self.evict_streamed(s, victim)?;
            return Ok(true);
        }
        if beyond.is_some() {
            return Ok(false);
        }
        self.release_chunk(s)
    }
}

/// Whether an unpinned resident object may leave to make room: always for
/// an object needed now (`beyond` is `None`), and when fetching ahead
/// `beyond` steps, only an object the plan does not keep (`kept`) whose
/// next use is later than that (`next`, in steps).
pub(in crate::residency) fn evictable_ahead(
    beyond: Option<usize>,
    kept: bool,
    next: usize,
) -> bool {
    beyond.is_none_or(|b| !kept && next > b)
}

#[cfg(test)]
mod tests {
    use super::super::super::driver::mock::Call;
    use super::super::testing::{MIB, id, manager, object};
    use crate::{MemoryClass, Placement};

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
}
