//! The pool's part of the budget: reserving and releasing pooled bytes,
//! what the pool really holds, and making room for a pooled request. The
//! [`BudgetAdaptor`](crate::BudgetAdaptor) is the only caller: the pool
//! resource itself counts nothing.

use super::Residency;
use super::batch::Batch;
use crate::{MemoryClass, Result};

impl Residency {
    /// Reserves room for `bytes` of pooled memory of `class` (the budget
    /// adaptor, before it forwards a pooled request).
    ///
    /// # Errors
    /// [`Error::OverBudget`](crate::Error::OverBudget) when the pool's
    /// footprint would exceed the budget (the budget adaptor then asks
    /// [`Residency::make_room`] and retries).
    pub(crate) fn reserve_pool(&self, class: MemoryClass, bytes: u64) -> Result<()> {
        let mut s = self.lock();
        if s.over(bytes, 0) {
            return Err(s.over_budget(bytes, Some(class)));
        }
        s.pool_used += bytes;
        s.pool_reserved = s.pool_reserved.max(s.pool_used);
        if let Some(c) = s.pool_by_class.get_mut(class.index()) {
            *c += bytes;
        }
        s.note_peak();
        Ok(())
    }

    /// Records what the pool really holds from the device, as the driver
    /// rounds it (the budget adaptor, after each pooled allocation; the
    /// footprint is at least live bytes and their high-water mark since a
    /// trim). It also ends a run of the pool's refusals.
    pub(crate) fn observe_pool(&self, held: u64) {
        let mut s = self.lock();
        s.streamed.placed();
        s.pool_reserved = s.pool_reserved.max(held);
        s.note_peak();
    }

    /// Releases pooled bytes reserved by [`Residency::reserve_pool`] (the
    /// budget adaptor, when the upstream refused or the block is freed).
    /// The pool keeps the memory (its footprint does not shrink until a
    /// trim).
    pub(crate) fn release_pool(&self, class: MemoryClass, bytes: u64) {
        let mut s = self.lock();
        s.pool_used = s.pool_used.saturating_sub(bytes);
        if let Some(c) = s.pool_by_class.get_mut(class.index()) {
            *c = c.saturating_sub(bytes);
        }
    }

    /// Trims the pool and evicts managed buffers and streamed objects so
    /// that `bytes` more pooled bytes fit. With `out_of_memory` (the pool
    /// refused although the accounting had room) streamed objects of at
    /// least `bytes` are evicted regardless. Returns whether it is worth
    /// retrying.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn make_room(&self, bytes: u64, out_of_memory: bool) -> Result<bool> {
        let mut s = self.lock();
        let mut batch = Batch::default();
        let fits = self.settle(&mut batch, &mut s, bytes, 0);
        self.finish(batch, &mut s)?;
        if out_of_memory {
            return self.relieve_streamed(&mut s, bytes, true);
        }
        if fits? {
            return Ok(true);
        }
        self.relieve_streamed(&mut s, bytes, false)
    }
}

#[cfg(test)]
mod tests {
    use super::super::driver::mock::Call;
    use super::super::testing::{MIB, id, manager, register};
    use crate::{Error, MemoryClass, Placement};

    #[test]
    fn pool_allocations_trim_then_evict() {
        let (r, d, stats) = manager(4 * MIB, true);
        register(&r, 1, MemoryClass::Plaintext, 2 * MIB);
        drop(r.prepare(&[id(1)]).expect("fits"));
        d.take();
        r.reserve_pool(MemoryClass::Temporary, 2 * MIB)
            .expect("fills the budget");
        r.release_pool(MemoryClass::Temporary, 2 * MIB);
        // The pool keeps the 2 MiB it held: a 1 MiB managed buffer needs a trim.
        register(&r, 2, MemoryClass::Ciphertext, MIB);
        drop(r.prepare(&[id(2)]).expect("trim makes room"));
        assert_eq!(
            d.take(),
            vec![Call::Begin, Call::Trim(0), Call::ToDevice(2), Call::End]
        );
        assert_eq!(stats.snapshot().pool_trims(), 1);
        // 3 MiB resident; 2 MiB of pool needs the plaintext out.
        assert!(matches!(
            r.reserve_pool(MemoryClass::Temporary, 2 * MIB),
            Err(Error::OverBudget { .. })
        ));
        assert!(r.make_room(2 * MIB, false).expect("room"));
        assert_eq!(d.take(), vec![Call::Begin, Call::ToHost(1), Call::End]);
        r.reserve_pool(MemoryClass::Temporary, 2 * MIB)
            .expect("fits now");
        let in_use = r.in_use();
        assert_eq!(
            in_use.get(MemoryClass::Temporary, Placement::DevicePool),
            2 * MIB
        );
        assert_eq!(in_use.get(MemoryClass::Ciphertext, Placement::Managed), MIB);
        assert_eq!(in_use.total(), 3 * MIB);
        // Nothing left to evict but the ciphertext: 4 MiB more cannot fit.
        assert!(!r.make_room(4 * MIB, false).expect("no error"));
    }

    /// Beside managed memory, pooled bytes count as the chunks the pool
    /// grows by: a request that fits by its bytes but not by the chunk the
    /// pool must add evicts a managed buffer first (without the granule it
    /// would not, and the pool's growth would take the device past the
    /// budget before anyone saw it).
    #[test]
    fn pooled_bytes_count_as_the_chunks_the_pool_grows_by() {
        for granule in [0, 32 * MIB] {
            let (r, _, _) = manager(64 * MIB, true);
            r.set_pool_granule(granule);
            register(&r, 1, MemoryClass::Ciphertext, 20 * MIB);
            drop(r.prepare(&[id(1)]).expect("fits"));
            r.reserve_pool(MemoryClass::Temporary, 20 * MIB)
                .expect("one chunk");
            // As the budget adaptor does: a refusal makes room, then retries.
            if r.reserve_pool(MemoryClass::Temporary, 20 * MIB).is_err() {
                assert!(r.make_room(20 * MIB, false).expect("driver"));
                r.reserve_pool(MemoryClass::Temporary, 20 * MIB)
                    .expect("fits after an eviction");
            }
            let evicted = r.is_resident(id(1)) == Some(false);
            assert_eq!(evicted, granule > 0, "granule {granule}");
        }
    }

    /// Free room in the pool is not counted on: the pool may still grow by
    /// a whole chunk (its room fragmented, or freed on a stream the GPU has
    /// not reached), so a request that its cached room would hold makes
    /// room for that chunk first — here a trim is enough, and the managed
    /// buffer stays resident.
    #[test]
    fn a_pooled_request_counts_the_growth_it_may_cause_despite_free_room() {
        let (r, d, stats) = manager(128 * MIB, true);
        r.set_pool_granule(32 * MIB);
        register(&r, 1, MemoryClass::EvaluationKey, 40 * MIB);
        drop(r.prepare(&[id(1)]).expect("fits"));
        r.reserve_pool(MemoryClass::Temporary, 44 * MIB)
            .expect("fits");
        r.observe_pool(64 * MIB);
        r.release_pool(MemoryClass::Temporary, 24 * MIB);
        d.take();
        // 44 MiB of the pool's 64 are free, but 64 + 32 + 40 > 128.
        assert!(matches!(
            r.reserve_pool(MemoryClass::Temporary, 20 * MIB),
            Err(Error::OverBudget { .. })
        ));
        assert!(r.make_room(20 * MIB, false).expect("room"));
        assert_eq!(d.take(), vec![Call::Begin, Call::Trim(20 * MIB), Call::End]);
        assert_eq!(stats.snapshot().pool_trims(), 1);
        r.reserve_pool(MemoryClass::Temporary, 20 * MIB)
            .expect("fits after the trim");
        assert_eq!(r.is_resident(id(1)), Some(true));
        assert!(r.usage().peak_device <= 128 * MIB);
    }
}
