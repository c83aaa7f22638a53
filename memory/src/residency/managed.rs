//! Managed buffers under the budget: the manager's record of each, and
//! their registration — new, handed out again while resident, or freed —
//! by the managed resource. Registration counts nothing: a buffer counts
//! once it is made resident, by an operation's declaration or, for a block
//! handed out with its pages still on the device, by the budget adaptor's
//! admission.

use std::sync::Arc;

use super::Residency;
use super::batch::Batch;
use super::driver::ManagedRange;
use super::eviction::Uses;
use crate::policy::Advice;
use crate::{AllocationId, DevicePtr, MemoryClass, Result};

#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub(super) class: MemoryClass,
    pub(super) ptr: DevicePtr,
    pub(super) bytes: u64,
    /// Whether the manager made it resident (and has not evicted it since).
    pub(super) resident: bool,
    /// Whether it has been on the device once (so bringing it back moves data).
    pub(super) populated: bool,
    /// Its pages are on the device but not counted yet: a freed block that
    /// was resident, handed out again ([`Residency::admit_managed`] decides
    /// whether it counts as resident).
    pub(super) on_device: bool,
    /// Counted resident for its whole life and never evicted: a constant
    /// table ([`MemoryClass::Constant`]). Kernels read twiddle and modulus
    /// tables without declaring them, so an evicted table would fault back
    /// in uncounted; instead the budget adaptor admits it at allocation.
    pub(super) fixed: bool,
    pub(super) read_mostly_wanted: bool,
    pub(super) read_mostly_set: bool,
    pub(super) uses: Uses,
    pub(super) pins: u32,
}

impl Entry {
    pub(super) fn range(&self, id: AllocationId) -> ManagedRange {
        ManagedRange {
            id,
            ptr: self.ptr,
            bytes: self.bytes,
        }
    }
}

impl Residency {
    /// Whether a managed buffer is resident by the manager's accounting.
    pub fn is_resident(&self, id: AllocationId) -> Option<bool> {
        self.lock().managed.get(&id).map(|e| e.resident)
    }

    /// Starts tracking a managed buffer (not resident yet).
    pub(crate) fn register_managed(
        &self,
        id: AllocationId,
        class: MemoryClass,
        ptr: DevicePtr,
        bytes: u64,
        advice: Advice,
    ) {
        self.track_managed(id, class, ptr, bytes, advice, false);
    }

    /// Starts tracking a managed buffer whose pages are already on the
    /// device: a freed block that was resident, handed out again by the
    /// managed resource's cache. It is not counted yet: the budget adaptor
    /// admits it ([`Residency::admit_managed`]) as the allocation passes.
    pub(crate) fn register_managed_on_device(
        &self,
        id: AllocationId,
        class: MemoryClass,
        ptr: DevicePtr,
        bytes: u64,
        advice: Advice,
    ) {
        self.track_managed(id, class, ptr, bytes, advice, true);
    }

    fn track_managed(
        &self,
        id: AllocationId,
        class: MemoryClass,
        ptr: DevicePtr,
        bytes: u64,
        advice: Advice,
        on_device: bool,
    ) {
        let mut s = self.lock();
        s.managed_allocated += bytes;
        s.managed.insert(
            id,
            Entry {
                class,
                ptr,
                bytes,
                resident: false,
                populated: false,
                on_device,
                fixed: class == MemoryClass::Constant,
                read_mostly_wanted: advice.read_mostly,
                read_mostly_set: false,
                uses: Uses::default(),
                pins: 0,
            },
        );
    }

    /// Admits a managed buffer as the budget adaptor lets its allocation
    /// pass; called by the [`BudgetAdaptor`](crate::BudgetAdaptor) alone.
    /// Returns whether it now counts as resident.
    ///
    /// * A block registered with its pages on the device
    ///   ([`Residency::register_managed_on_device`]) is counted as resident
    ///   at once — its first use then needs no prefetch, which for a fresh
    ///   output costs a copy-stream round trip per operation — when room can
    ///   be made for it under the budget (trimming the pool, evicting as for
    ///   any other request). Otherwise it stays tracked as not resident, as
    ///   a new buffer is, and is brought in (and counted) on its first use.
    /// * A constant table is brought to the device now, as an operation's
    ///   declaration would bring it, and stays counted until it is freed.
    /// * Other buffers are left as they are (`false`).
    ///
    /// # Errors
    /// [`Error::OverBudget`](crate::Error::OverBudget) when a constant table
    /// cannot fit; driver errors from the trim or the evictions.
    pub(crate) fn admit_managed(self: &Arc<Self>, id: AllocationId) -> Result<bool> {
        let (on_device, fixed) = match self.lock().managed.get(&id) {
            Some(e) if !e.resident => (e.on_device, e.fixed),
            _ => return Ok(false),
        };
        if on_device && self.admit_on_device(id)? {
            return Ok(true);
        }
        if fixed {
            drop(self.prepare(&[id])?);
            return Ok(true);
        }
        Ok(false)
    }

    /// Counts a block whose pages are on the device as resident when room
    /// can be made for it; `false` when it cannot.
    fn admit_on_device(&self, id: AllocationId) -> Result<bool> {
        let mut s = self.lock();
        let Some(entry) = s.managed.get_mut(&id) else {
            return Ok(false);
        };
        entry.on_device = false;
        let bytes = entry.bytes;
        let mut batch = Batch::default();
        let settled = self.settle(&mut batch, &mut s, 0, bytes);
        let finished = self.finish(batch, &mut s);
        let fits = settled?;
        finished?;
        if !fits {
            return Ok(false);
        }
        let Some(entry) = s.managed.get_mut(&id) else {
            return Ok(false);
        };
        entry.resident = true;
        entry.populated = true;
        s.managed_resident += bytes;
        s.note_peak();
        Ok(true)
    }

    /// Stops tracking a managed buffer that is being freed.
    pub(crate) fn unregister_managed(&self, id: AllocationId) {
        let mut s = self.lock();
        if let Some(entry) = s.managed.remove(&id) {
            s.managed_allocated = s.managed_allocated.saturating_sub(entry.bytes);
            if entry.resident {
                s.managed_resident = s.managed_resident.saturating_sub(entry.bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::driver::mock::Call;
    use super::super::testing::{MIB, id, manager, register};
    use crate::policy::Advice;
    use crate::{DevicePtr, MemoryClass};

    #[test]
    fn a_reused_resident_block_counts_at_once_and_needs_no_prefetch() {
        let (r, d, stats) = manager(3 * MIB, true);
        let reuse = |n: u64| {
            r.register_managed_on_device(
                id(n),
                MemoryClass::Ciphertext,
                DevicePtr(n << 20),
                MIB,
                Advice::NONE,
            );
            r.admit_managed(id(n)).expect("driver")
        };
        register(&r, 1, MemoryClass::Ciphertext, MIB);
        register(&r, 2, MemoryClass::Ciphertext, MIB);
        let guard = r.prepare(&[id(1), id(2)]).expect("fits");
        drop(guard);
        d.take();
        // Room for one more: counted resident, no driver call at all.
        let resident = reuse(3);
        assert!(resident);
        assert_eq!(r.is_resident(id(3)), Some(true));
        assert_eq!(r.usage().device_bytes(), 3 * MIB);
        let guard = r.prepare(&[id(3)]).expect("resident");
        drop(guard);
        assert_eq!(d.take(), vec![], "a resident block is not prefetched");
        // A fourth needs room: the least recently used (1) is evicted.
        let resident = reuse(4);
        assert!(resident);
        assert_eq!(r.is_resident(id(1)), Some(false));
        assert!(r.usage().device_bytes() <= 3 * MIB);
        assert!(d.take().contains(&Call::ToHost(1)));
        // With every resident buffer declared there is no room: tracked as
        // not resident, brought in (and accounted) on its first use instead.
        let _held = r.prepare(&[id(2), id(3), id(4)]).expect("resident");
        let resident = reuse(5);
        assert!(!resident);
        assert_eq!(r.is_resident(id(5)), Some(false));
        assert!(r.usage().device_bytes() <= 3 * MIB);
        assert_eq!(stats.snapshot().total().prefetched_to_device, 0);
    }

    #[test]
    fn unknown_ids_are_ignored_and_freed_buffers_leave_the_accounting() {
        let (r, d, _) = manager(2 * MIB, true);
        register(&r, 1, MemoryClass::Ciphertext, MIB);
        let g = r.prepare(&[id(1), id(1), id(99)]).expect("fits");
        assert_eq!(g.ids(), &[id(1)]);
        r.unregister_managed(id(1));
        drop(g);
        assert_eq!(r.usage().managed_resident, 0);
        assert_eq!(r.usage().managed_allocated, 0);
        assert_eq!(d.take(), vec![Call::Begin, Call::ToDevice(1), Call::End]);
    }

    /// Freed managed blocks kept resident count against the budget, in the
    /// device bytes and in the test of whether more fits; when an operation
    /// needs their room they are given back (the registered release runs)
    /// before any live buffer is evicted, and only then are buffers evicted.
    #[test]
    fn kept_blocks_count_and_go_before_live_buffers() {
        use rand_core::{Rng as _, SeedableRng as _};
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU64, Ordering};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0x6e97);
        for _ in 0..40 {
            let budget = 8 * MIB;
            let (r, d, _) = manager(budget, true);
            let released = Arc::new(AtomicU64::new(0));
            let calls = Arc::clone(&released);
            r.set_kept_release(Box::new(move || {
                calls.fetch_add(1, Ordering::Relaxed);
                0
            }));
            // Live buffers fill part of the budget; the kept blocks the rest.
            let live = 1 + rng.next_u64() % 4;
            for n in 1..=live {
                register(&r, n, MemoryClass::Ciphertext, MIB);
            }
            let ids: Vec<_> = (1..=live).map(id).collect();
            drop(r.prepare(&ids).expect("fits"));
            let kept = (budget - live * MIB).saturating_sub(1 + rng.next_u64() % MIB);
            r.observe_managed_kept(kept);
            assert_eq!(r.usage().managed_kept, kept, "under the budget: kept");
            assert_eq!(released.load(Ordering::Relaxed), 0);
            assert_eq!(r.usage().device_bytes(), live * MIB + kept);
            d.take();
            // One more MiB does not fit beside the kept blocks: they go, and
            // no live buffer is evicted.
            register(&r, 99, MemoryClass::Ciphertext, MIB);
            drop(r.prepare(&[id(99)]).expect("fits once the kept blocks go"));
            assert_eq!(released.load(Ordering::Relaxed), 1);
            assert_eq!(r.usage().managed_kept, 0);
            let calls = d.take();
            assert!(
                !calls.iter().any(|c| matches!(c, Call::ToHost(_))),
                "{calls:?}"
            );
            assert!(r.usage().device_bytes() <= budget);
            for n in 1..=live {
                assert_eq!(r.is_resident(id(n)), Some(true));
            }
            // Blocks kept past the budget (a free of resident pages) go at
            // once: the device never holds more than the budget.
            r.observe_managed_kept(budget);
            assert_eq!(released.load(Ordering::Relaxed), 2);
            assert_eq!(r.usage().managed_kept, 0);
            assert!(r.usage().peak_device <= budget);
        }
    }
}
