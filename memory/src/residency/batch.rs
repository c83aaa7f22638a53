//! Batches of driver actions: the trims, advice and prefetches a decision
//! plans, carried out between one `begin` and `end` of the driver, with the
//! host time each kind takes.

use super::Residency;
use super::driver::ManagedRange;
use super::state::State;
use crate::Result;

/// Nanoseconds since `start`, saturating.
pub(super) fn nanos_since(start: std::time::Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Trim {
        keep: u64,
    },
    ReadMostly {
        range: ManagedRange,
        on: bool,
    },
    Prefetch {
        range: ManagedRange,
        to_device: bool,
    },
    /// The managed resource frees the blocks it keeps
    /// ([`Residency::set_kept_release`]).
    ReleaseKept,
}

/// Driver calls between one `begin` and `end`.
#[derive(Debug, Default)]
pub(super) struct Batch {
    open: bool,
}

impl Residency {
    /// Carries out `actions` in `batch` (opened by the first action).
    pub(super) fn execute(
        &self,
        batch: &mut Batch,
        actions: &[Action],
        state: &mut State,
    ) -> Result<()> {
        if actions.is_empty() {
            return Ok(());
        }
        if !batch.open {
            let start = std::time::Instant::now();
            self.driver.begin()?;
            state.driver_time.order_ns += nanos_since(start);
            batch.open = true;
        }
        for action in actions {
            let start = std::time::Instant::now();
            let spent = match *action {
                Action::Trim { keep } => {
                    let held = self.driver.trim_pool(keep)?;
                    state.pool_reserved = held.max(state.pool_used);
                    &mut state.driver_time.trim_ns
                }
                Action::ReadMostly { range, on } => {
                    self.driver.set_read_mostly(range, on)?;
                    if on {
                        &mut state.driver_time.advise_on_ns
                    } else {
                        &mut state.driver_time.advise_off_ns
                    }
                }
                Action::Prefetch { range, to_device } => {
                    self.driver.prefetch(range, to_device)?;
                    if to_device {
                        &mut state.driver_time.to_device_ns
                    } else {
                        &mut state.driver_time.to_host_ns
                    }
                }
                Action::ReleaseKept => {
                    if let Some(release) = self.kept_release.get() {
                        release();
                    }
                    state.managed_kept = 0;
                    &mut state.driver_time.trim_ns
                }
            };
            *spent += nanos_since(start);
        }
        Ok(())
    }

    /// Closes `batch` if an action opened it.
    pub(super) fn finish(&self, batch: Batch, state: &mut State) -> Result<()> {
        if batch.open {
            let start = std::time::Instant::now();
            let ended = self.driver.end();
            state.driver_time.order_ns += nanos_since(start);
            ended
        } else {
            Ok(())
        }
    }

    /// Trims the pool and evicts until `extra_pool` more pooled bytes and
    /// `extra_managed` more resident managed bytes fit, carrying the plan
    /// out. Returns whether they fit.
    ///
    /// A trim may leave the pool holding more than its live bytes: it keeps
    /// whole chunks that a live allocation shares, and memory whose
    /// stream-ordered free the GPU has not reached yet (measured on the H200
    /// during FGb key generation under a 4 GiB budget). The trim reports what
    /// the pool really holds, so when the plan fell short, further buffers
    /// are evicted against that footprint.
    ///
    /// # Errors
    /// Driver errors.
    pub(super) fn settle(
        &self,
        batch: &mut Batch,
        s: &mut State,
        extra_pool: u64,
        extra_managed: u64,
    ) -> Result<bool> {
        let mut actions = Vec::new();
        let fits = s.make_room(extra_pool, extra_managed, &mut actions, &self.statistics);
        self.execute(batch, &actions, s)?;
        if !fits || !s.over(extra_pool, extra_managed) {
            return Ok(fits);
        }
        actions.clear();
        let fits = s.evict_until_fits(extra_pool, extra_managed, &mut actions, &self.statistics);
        self.execute(batch, &actions, s)?;
        Ok(fits && !s.over(extra_pool, extra_managed))
    }
}

#[cfg(test)]
mod tests {
    use super::super::driver::mock::Call;
    use super::super::testing::{MIB, id, manager, register};
    use crate::MemoryClass;

    #[test]
    fn a_pool_that_keeps_memory_after_a_trim_costs_further_evictions() {
        let half = MIB / 2;
        let (r, d, _) = manager(8 * MIB, true);
        for n in 1..=3 {
            register(&r, n, MemoryClass::EvaluationKey, 2 * MIB);
        }
        drop(r.prepare(&[id(1), id(2)]).expect("fits"));
        // The pool has held 2.5 MiB; 1 MiB of it is live.
        r.reserve_pool(MemoryClass::Temporary, 5 * half)
            .expect("fits");
        r.release_pool(MemoryClass::Temporary, 3 * half);
        d.take();
        // Key 3 fits once the pool is trimmed to its live 1 MiB, so the plan
        // is a trim alone. But the trim gives nothing back (the pool's chunk
        // is shared with the live allocation): key 1 must leave.
        d.trim_slack
            .store(3 * half, std::sync::atomic::Ordering::Relaxed);
        drop(r.prepare(&[id(3)]).expect("fits after a further eviction"));
        assert_eq!(
            d.take(),
            vec![
                Call::Begin,
                Call::Trim(MIB),
                Call::ReadMostly(1, false),
                Call::ToHost(1),
                Call::ReadMostly(3, true),
                Call::ToDevice(3),
                Call::End
            ]
        );
        assert_eq!(r.usage().device_bytes(), 5 * half + 4 * MIB);
    }
}
