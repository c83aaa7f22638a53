//! Refusals of the pool: it could not place a request the accounting had
//! room for. Each run of refusals escalates (a trim, a wait for the
//! streams, evictions), and widens the room the look-ahead leaves free.

use super::super::Residency;
use super::super::state::State;
use super::StreamedState;
use crate::Result;

impl StreamedState {
    /// The pool placed a request: ends a run of refusals.
    pub(in crate::residency) fn placed(&mut self) {
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
    /// What a refusal of the pool (it could not place `bytes` although the
    /// accounting had room) leads to, by how many came in a row: first the
    /// pool gives back the chunks it holds unused (its free memory may lie
    /// in chunks too small for the request); then the streams are waited for
    /// too (frees not reached yet: the host runs ahead of the device);
    /// from the third on, streamed objects of `bytes` leave first, and the
    /// look-ahead leaves a little more room from then on. `Ok(false)` when
    /// nothing is left to try.
    pub(super) fn escalate(&self, s: &mut State, streak: u32, bytes: u64) -> Result<bool> {
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
    pub(in crate::residency) fn relieve_streamed(
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

#[cfg(test)]
mod tests {
    use super::super::super::driver::mock::Call;
    use super::super::testing::{MIB, id, manager, object};
    use crate::Error;
    use std::sync::atomic::Ordering;

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
}
