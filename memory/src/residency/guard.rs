//! Declaring what an operation touches: [`Residency::prepare`] brings the
//! declared buffers to the device and pins them, and the
//! [`ResidencyGuard`] it returns keeps them from eviction until it drops.

use std::sync::Arc;

use super::Residency;
use super::batch::{Action, Batch};
use super::state::State;
use super::streamed;
use crate::statistics::Traffic;
use crate::{AllocationId, MemoryClass, Result};

/// The one class of `classes`, `None` when they are mixed or empty.
fn one_class(mut classes: impl Iterator<Item = MemoryClass>) -> Option<MemoryClass> {
    let first = classes.next()?;
    classes.all(|c| c == first).then_some(first)
}

impl Residency {
    /// Declares the buffers (by id) an operation is about to touch: brings the
    /// managed ones to the device, evicting others to stay under the budget,
    /// and keeps them from eviction until the guard drops. Ids the manager
    /// does not track (pooled or host buffers) are ignored.
    ///
    /// # Errors
    /// [`Error::OverBudget`](crate::Error::OverBudget) when the declared
    /// buffers alone do not fit; driver errors.
    pub fn prepare(self: &Arc<Self>, ids: &[AllocationId]) -> Result<ResidencyGuard> {
        let start = std::time::Instant::now();
        let guard = self.prepare_untimed(ids);
        self.lock().driver_time.prepare_ns += super::batch::nanos_since(start);
        guard
    }

    /// [`Self::prepare`], without adding its host time to
    /// [`DriverTime::prepare_ns`](super::DriverTime::prepare_ns).
    fn prepare_untimed(self: &Arc<Self>, ids: &[AllocationId]) -> Result<ResidencyGuard> {
        let mut s = self.lock();
        let mut managed: Vec<AllocationId> = Vec::with_capacity(ids.len());
        let mut streamed: Vec<AllocationId> = Vec::new();
        for &id in ids {
            if s.managed.contains_key(&id) && !managed.contains(&id) {
                managed.push(id);
            } else if s.streamed.entries.contains_key(&id) && !streamed.contains(&id) {
                streamed.push(id);
            }
        }
        // Everything the guard will hold, pinned now and unpinned on any error.
        let held: Vec<AllocationId> = managed.iter().chain(&streamed).copied().collect();
        pin(&mut s, &held);
        if !streamed.is_empty() {
            match self.prepare_streamed(&mut s, &streamed) {
                Ok(true) => {}
                Ok(false) => {
                    // What did not fit: the declared objects not resident
                    // (all of them when each is, but not together).
                    let declared: Vec<&streamed::StreamedEntry> = streamed
                        .iter()
                        .filter_map(|id| s.streamed.entries.get(id))
                        .collect();
                    let missing: u64 = declared
                        .iter()
                        .filter(|e| e.device.is_none())
                        .map(|e| e.bytes)
                        .sum();
                    let requested = if missing > 0 {
                        missing
                    } else {
                        declared.iter().map(|e| e.bytes).sum()
                    };
                    let class = one_class(declared.iter().map(|e| e.class));
                    unpin(&mut s, &held);
                    return Err(s.over_budget(requested, class));
                }
                Err(e) => {
                    unpin(&mut s, &held);
                    return Err(e);
                }
            }
        }
        let needed: u64 = managed
            .iter()
            .filter_map(|id| s.managed.get(id))
            .filter(|e| !e.resident)
            .map(|e| e.bytes)
            .sum();
        // What could be planned (a trim, evictions) is carried out even when
        // the declared buffers cannot fit, so the accounting matches the
        // device.
        let mut batch = Batch::default();
        // Nothing to bring in: nothing needs to fit (a pool already over
        // a budget that shrank is not this operation's concern).
        let settled = if needed == 0 {
            Ok(true)
        } else {
            self.settle(&mut batch, &mut s, 0, needed)
        };
        let fits = match settled {
            Ok(fits) => fits,
            Err(e) => {
                unpin(&mut s, &held);
                // The driver error is what is reported; closing the batch
                // is best effort.
                let _ = self.finish(batch, &mut s);
                return Err(e);
            }
        };
        let mut actions = Vec::new();
        if !fits {
            unpin(&mut s, &held);
            self.finish(batch, &mut s)?;
            let class = one_class(
                managed
                    .iter()
                    .filter_map(|id| s.managed.get(id))
                    .filter(|e| !e.resident)
                    .map(|e| e.class),
            );
            return Err(s.over_budget(needed, class));
        }
        for id in &managed {
            s.clock += 1;
            let clock = s.clock;
            let prefetch = self.prefetch_on_use;
            let Some(e) = s.managed.get_mut(id) else {
                continue;
            };
            e.uses.record(clock);
            if e.resident {
                continue;
            }
            let range = e.range(*id);
            if e.read_mostly_wanted && !e.read_mostly_set {
                actions.push(Action::ReadMostly { range, on: true });
                e.read_mostly_set = true;
            }
            if prefetch {
                actions.push(Action::Prefetch {
                    range,
                    to_device: true,
                });
                if e.populated {
                    self.statistics
                        .record_traffic(e.class, Traffic::ToDevice(e.bytes));
                }
            }
            e.resident = true;
            e.populated = true;
            let bytes = e.bytes;
            s.managed_resident += bytes;
        }
        s.note_peak();
        self.execute(&mut batch, &actions, &mut s)?;
        self.finish(batch, &mut s)?;
        drop(s);
        Ok(ResidencyGuard {
            residency: Some(Arc::clone(self)),
            ids: held,
        })
    }
}

/// Starts one operation's claim on `ids` (managed buffers and streamed
/// objects): none of them is evicted until the claim ends.
pub(super) fn pin(s: &mut State, ids: &[AllocationId]) {
    for id in ids {
        if let Some(e) = s.managed.get_mut(id) {
            e.pins += 1;
        } else if let Some(e) = s.streamed.entries.get_mut(id) {
            e.pins += 1;
        }
    }
}

/// Ends one operation's claim on `ids`.
pub(super) fn unpin(s: &mut State, ids: &[AllocationId]) {
    for id in ids {
        if let Some(e) = s.managed.get_mut(id) {
            e.pins = e.pins.saturating_sub(1);
        } else if let Some(e) = s.streamed.entries.get_mut(id) {
            e.pins = e.pins.saturating_sub(1);
        }
    }
}

/// Keeps the buffers an operation declared from being evicted; dropping it
/// ends the operation's claim (the work it queued stays ordered before any
/// later eviction).
#[derive(Debug)]
#[must_use = "dropping the guard at once lets the buffers be evicted by the next operation"]
pub struct ResidencyGuard {
    residency: Option<Arc<Residency>>,
    ids: Vec<AllocationId>,
}

impl ResidencyGuard {
    /// A guard that holds nothing (host allocators).
    pub(crate) fn empty() -> Self {
        Self {
            residency: None,
            ids: Vec::new(),
        }
    }

    /// The managed buffers the guard keeps resident.
    pub fn ids(&self) -> &[AllocationId] {
        &self.ids
    }
}

impl Drop for ResidencyGuard {
    fn drop(&mut self) {
        if let Some(r) = &self.residency {
            r.end_use(&self.ids);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::driver::mock::Call;
    use super::super::testing::{MIB, id, manager, register};
    use crate::MemoryClass;

    #[test]
    fn managed_policy_evicts_but_does_not_prefetch() {
        let (r, d, stats) = manager(MIB, false);
        register(&r, 1, MemoryClass::Ciphertext, MIB);
        register(&r, 2, MemoryClass::Ciphertext, MIB);
        drop(r.prepare(&[id(1)]).expect("fits"));
        assert_eq!(d.take(), vec![]);
        assert_eq!(r.is_resident(id(1)), Some(true));
        drop(r.prepare(&[id(2)]).expect("evicts"));
        assert_eq!(d.take(), vec![Call::Begin, Call::ToHost(1), Call::End]);
        assert_eq!(r.is_resident(id(1)), Some(false));
        let s = stats.snapshot().total();
        assert_eq!((s.evictions, s.prefetched_to_device), (1, 0));
    }
}
