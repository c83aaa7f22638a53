//! The budget adaptor: the one place where device bytes are admitted under
//! the device budget or refused, after RMM's `limiting_resource_adaptor`
//! (it counts what passes through it against a limit) and
//! `failure_callback_resource_adaptor` (a refusal may make room and retry).
//!
//! Who counts what:
//!
//! * **pooled blocks** — this adaptor, alone. Before it forwards a request it
//!   asks the upstream where the request will go
//!   ([`MemoryResource::placement`]); for the pool it reserves the bytes with
//!   the [`Residency`] manager, whose state holds the figures and decides
//!   whether they fit. It gives them back when the upstream refuses and when
//!   the block is freed, and after each pooled allocation it records what
//!   the pool really holds from the driver ([`MemoryResource::held_bytes`]:
//!   the pool reserves in chunks, and that rounding counts too). The
//!   resources below only allocate and free.
//! * **managed blocks** — counted when they are made resident. A new block
//!   has no pages on the device; a freed block handed out again while its
//!   pages are still there is admitted by this adaptor as it passes (counted
//!   resident at once when room can be made for it). Operations'
//!   declarations ([`crate::Allocator::prepare`]) make the others resident,
//!   through the same arithmetic.
//! * **streamed objects** — their masters are host memory; their device
//!   copies are counted by the residency manager when it fetches them.
//!
//! The residency manager holds a single count of device-resident bytes
//! ([`crate::ResidencyUsage::device_bytes`]) and a single test of whether
//! more bytes fit; this adaptor and the manager's own decisions are its only
//! callers.

use std::sync::Arc;

use crate::residency::Residency;
use crate::{AllocRequest, Allocation, Error, MemoryClass, MemoryResource, Placement, Result};

/// Keeps allocations under the device budget: reserves a request's device
/// bytes before forwarding it, and when they do not fit — or the upstream
/// refuses for want of device room (the pool's own out-of-memory) — asks the
/// residency manager to make room (trim the pool, evict least recently used
/// managed buffers and streamed objects no operation holds) and retries, a
/// bounded number of times. Then it gives up with [`Error::OverBudget`]:
/// what was requested, the budget, and the device-resident bytes per class
/// and placement.
///
/// Thread-safe: the reservation is taken under the manager's lock, so two
/// requests never both fit in the same room.
#[derive(Debug)]
pub struct BudgetAdaptor<R> {
    upstream: R,
    residency: Arc<Residency>,
    retries: u32,
}

impl<R: MemoryResource> BudgetAdaptor<R> {
    /// Retries after making room at most this many times per request.
    pub const DEFAULT_RETRIES: u32 = 6;

    /// Wraps `upstream`, enforcing `residency`'s budget.
    pub fn new(upstream: R, residency: Arc<Residency>) -> Self {
        Self {
            upstream,
            residency,
            retries: Self::DEFAULT_RETRIES,
        }
    }

    /// The wrapped resource.
    pub fn upstream(&self) -> &R {
        &self.upstream
    }

    /// The residency manager whose budget is enforced.
    pub fn residency(&self) -> &Arc<Residency> {
        &self.residency
    }

    /// Reserves `bytes` of `class` for `placement` (pooled bytes are the
    /// ones counted as they are allocated).
    fn reserve(&self, placement: Placement, class: MemoryClass, bytes: u64) -> Result<()> {
        match placement {
            Placement::DevicePool => self.residency.reserve_pool(class, bytes),
            _ => Ok(()),
        }
    }

    /// Gives back what [`BudgetAdaptor::reserve`] took.
    fn release(&self, placement: Placement, class: MemoryClass, bytes: u64) {
        if placement == Placement::DevicePool {
            self.residency.release_pool(class, bytes);
        }
    }

    /// One attempt: reserve for `planned` (the upstream's answer, if it
    /// gave one), forward, then settle the count with what the upstream
    /// did.
    fn attempt(&self, request: &AllocRequest, planned: Option<Placement>) -> Result<Allocation> {
        let (class, bytes) = (request.class, request.bytes as u64);
        if let Some(p) = planned {
            self.reserve(p, class, bytes)?;
        }
        let allocation = match self.upstream.allocate(request) {
            Ok(allocation) => allocation,
            Err(e) => {
                if let Some(p) = planned {
                    self.release(p, class, bytes);
                }
                return Err(e);
            }
        };
        let placement = allocation.placement;
        if planned != Some(placement) {
            // Placed elsewhere than announced (or unannounced): count what
            // was done, and undo it when it does not fit.
            if let Some(p) = planned {
                self.release(p, class, bytes);
            }
            if let Err(e) = self.reserve(placement, class, bytes) {
                self.upstream.deallocate(allocation);
                return Err(e);
            }
        }
        match placement {
            Placement::DevicePool => {
                if let Some(held) = self.upstream.held_bytes(placement) {
                    self.residency.observe_pool(held);
                }
            }
            Placement::Managed => {
                // A block handed out with its pages on the device counts as
                // resident at once when room can be made for it.
                if let Err(e) = self.residency.admit_managed(allocation.id) {
                    self.upstream.deallocate(allocation);
                    return Err(e);
                }
            }
            _ => {}
        }
        Ok(allocation)
    }
}

/// Whether `error` is a refusal for want of device room.
fn needs_room(error: &Error) -> bool {
    matches!(
        error,
        Error::OverBudget { .. }
            | Error::OutOfMemory {
                placement: Placement::DevicePool,
                ..
            }
    )
}

impl<R: MemoryResource> MemoryResource for BudgetAdaptor<R> {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        let bytes = request.bytes as u64;
        let planned = self.upstream.placement(request)?;
        let mut attempt = 0;
        loop {
            let error = match self.attempt(request, planned) {
                Ok(allocation) => return Ok(allocation),
                Err(e) if needs_room(&e) => e,
                Err(e) => return Err(e),
            };
            let out_of_memory = matches!(error, Error::OutOfMemory { .. });
            let made_room =
                attempt < self.retries && self.residency.make_room(bytes, out_of_memory)?;
            if !made_room {
                // The pool never holds more than the budget (its maximum
                // size), so a pool out of memory is the budget's refusal too.
                return Err(self.residency.over_budget(bytes, request.class));
            }
            attempt += 1;
        }
    }

    fn deallocate(&self, allocation: Allocation) {
        let (placement, class, bytes) = (
            allocation.placement,
            allocation.class,
            allocation.bytes as u64,
        );
        self.upstream.deallocate(allocation);
        self.release(placement, class, bytes);
    }

    fn placement(&self, request: &AllocRequest) -> Result<Option<Placement>> {
        self.upstream.placement(request)
    }

    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        self.upstream.held_bytes(placement)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use rand_core::{Rng as _, SeedableRng as _};

    use super::*;
    use crate::policy::Advice;
    use crate::residency::{Eviction, NullDriver};
    use crate::statistics::StatisticsHandle;
    use crate::{AllocationId, DeviceMemory, DevicePtr, Memory, StreamId};

    const MIB: u64 = 1 << 20;

    #[derive(Debug, Default)]
    struct Pool {
        live: u64,
        held: u64,
        failures: VecDeque<Error>,
        freed: Vec<AllocationId>,
    }

    /// An upstream without a device: places where it is told, announces
    /// what it is told (or nothing), holds its live bytes rounded up to
    /// `granule` and keeps them until dropped, as the driver's pool does,
    /// and fails the next requests with the queued errors. It counts
    /// nothing against the budget: that is the adaptor's job.
    #[derive(Debug)]
    struct Mock {
        announces: Option<Placement>,
        places: Placement,
        granule: u64,
        pool: Mutex<Pool>,
    }

    impl Mock {
        fn new(announces: Option<Placement>, places: Placement, granule: u64) -> Self {
            Self {
                announces,
                places,
                granule,
                pool: Mutex::new(Pool::default()),
            }
        }

        fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
            self.pool.lock().expect("mock")
        }

        fn fail_next(&self, error: Error) {
            self.pool().failures.push_back(error);
        }
    }

    impl MemoryResource for Mock {
        fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
            let mut pool = self.pool();
            if let Some(e) = pool.failures.pop_front() {
                return Err(e);
            }
            pool.live += request.bytes as u64;
            pool.held = pool.held.max(pool.live.next_multiple_of(self.granule));
            let memory = DeviceMemory {
                ptr: DevicePtr(request.id.0 << 32),
                stream: StreamId::Compute,
            };
            let memory = match self.places {
                Placement::Managed => Memory::Managed(memory),
                _ => Memory::DevicePool(memory),
            };
            Ok(Allocation::new(request, self.places, memory))
        }

        fn deallocate(&self, allocation: Allocation) {
            let mut pool = self.pool();
            pool.live -= allocation.bytes as u64;
            pool.freed.push(allocation.id);
        }

        fn placement(&self, _request: &AllocRequest) -> Result<Option<Placement>> {
            Ok(self.announces)
        }

        fn held_bytes(&self, placement: Placement) -> Option<u64> {
            (placement == Placement::DevicePool).then(|| self.pool().held)
        }
    }

    fn budgeted(budget: u64, upstream: Mock) -> BudgetAdaptor<Mock> {
        let residency = Arc::new(Residency::new(
            budget,
            true,
            Eviction::default(),
            Box::new(NullDriver),
            StatisticsHandle::default(),
        ));
        BudgetAdaptor::new(upstream, residency)
    }

    fn request(id: u64, class: MemoryClass, bytes: u64) -> AllocRequest {
        AllocRequest {
            id: AllocationId(id),
            bytes: bytes as usize,
            class,
            sensitive: false,
            stream: StreamId::Compute,
        }
    }

    fn random_class(rng: &mut impl rand_core::Rng) -> MemoryClass {
        let i = rng.next_u64() as usize % MemoryClass::ALL.len();
        *MemoryClass::ALL.get(i).expect("a class")
    }

    /// Random requests and frees against a model of the budget: a request
    /// is refused, with the per-class bytes in use, exactly when the live
    /// bytes plus its own would exceed the budget; frees give bytes back.
    #[test]
    fn refuses_exactly_when_the_sum_exceeds_the_budget_and_says_what_is_in_use() {
        let seed = 0xb0d6_e701;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        for round in 0..4 {
            let budget = MIB * (4 + rng.next_u64() % 12);
            let a = budgeted(
                budget,
                Mock::new(Some(Placement::DevicePool), Placement::DevicePool, 1),
            );
            let mut live: Vec<Allocation> = Vec::new();
            let mut by_class = [0u64; 6];
            for n in 1..=200u64 {
                if !live.is_empty() && rng.next_u64() % 3 == 0 {
                    let i = rng.next_u64() as usize % live.len();
                    let freed = live.swap_remove(i);
                    if let Some(c) = by_class.get_mut(freed.class.index()) {
                        *c -= freed.bytes as u64;
                    }
                    a.deallocate(freed);
                }
                let bytes = 1 + rng.next_u64() % (2 * MIB);
                let class = random_class(&mut rng);
                let sum: u64 = by_class.iter().sum();
                match a.allocate(&request(n, class, bytes)) {
                    Ok(allocation) => {
                        assert!(sum + bytes <= budget, "seed {seed} round {round} n {n}");
                        if let Some(c) = by_class.get_mut(class.index()) {
                            *c += bytes;
                        }
                        live.push(allocation);
                    }
                    Err(Error::OverBudget {
                        requested,
                        placing,
                        budget: b,
                        in_use,
                    }) => {
                        assert!(sum + bytes > budget, "seed {seed} round {round} n {n}");
                        assert_eq!((requested, placing, b), (bytes, Some(class), budget));
                        for c in MemoryClass::ALL {
                            let expected = by_class.get(c.index()).copied().unwrap_or(0);
                            assert_eq!(in_use.get(c, Placement::DevicePool), expected);
                        }
                    }
                    Err(e) => panic!("seed {seed}: unexpected {e:?}"),
                }
                assert_eq!(a.residency().usage().pool_used, by_class.iter().sum());
            }
            for allocation in live.drain(..) {
                a.deallocate(allocation);
            }
            assert_eq!(a.residency().usage().pool_used, 0, "seed {seed}");
            assert!(a.residency().usage().peak_device <= budget, "seed {seed}");
        }
    }

    #[test]
    fn an_upstream_failure_gives_the_reservation_back() {
        let seed = 0xfa11_0001;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let a = budgeted(
            16 * MIB,
            Mock::new(Some(Placement::DevicePool), Placement::DevicePool, 1),
        );
        let bytes = 1 + rng.next_u64() % (4 * MIB);
        // A refusal that is not for want of room is returned as it is.
        let too_large = Error::TooLarge {
            requested: bytes as usize,
            limit: 1,
            class: MemoryClass::Temporary,
        };
        a.upstream().fail_next(too_large.clone());
        assert_eq!(
            a.allocate(&request(1, MemoryClass::Temporary, bytes))
                .map(|_| ()),
            Err(too_large)
        );
        assert_eq!(a.residency().usage().pool_used, 0, "seed {seed}");
        // The pool's own out-of-memory: room is made and the request
        // retried, counted once.
        a.upstream().fail_next(Error::OutOfMemory {
            requested: bytes as usize,
            placement: Placement::DevicePool,
            class: MemoryClass::Ciphertext,
        });
        let kept = a
            .allocate(&request(2, MemoryClass::Ciphertext, bytes))
            .expect("placed on the retry");
        assert_eq!(a.residency().usage().pool_used, bytes, "seed {seed}");
        // A pool that keeps refusing: the typed refusal, nothing counted.
        for _ in 0..=BudgetAdaptor::<Mock>::DEFAULT_RETRIES {
            a.upstream().fail_next(Error::OutOfMemory {
                requested: 1,
                placement: Placement::DevicePool,
                class: MemoryClass::Temporary,
            });
        }
        let other = 1 + rng.next_u64() % MIB;
        assert!(matches!(
            a.allocate(&request(3, MemoryClass::Temporary, other)),
            Err(Error::OverBudget { requested, placing: Some(MemoryClass::Temporary), .. })
                if requested == other
        ));
        let usage = a.residency().usage();
        assert_eq!(usage.pool_used, bytes, "seed {seed}");
        assert_eq!(
            a.residency()
                .in_use()
                .get(MemoryClass::Temporary, Placement::DevicePool),
            0
        );
        a.deallocate(kept);
        assert_eq!(a.residency().usage().pool_used, 0, "seed {seed}");
    }

    /// What the pool holds as the driver rounds it is what the budget
    /// counts as the pool's footprint; beside managed memory it is what
    /// must fit, so bringing a managed buffer in then costs a trim.
    #[test]
    fn the_pools_rounding_counts() {
        use crate::residency::driver::mock::{Call, RecordingDriver};
        let seed = 0x0c4a_0001;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let driver = RecordingDriver::default();
        let residency = Arc::new(Residency::new(
            8 * MIB,
            true,
            Eviction::default(),
            Box::new(driver.clone()),
            StatisticsHandle::default(),
        ));
        let a = BudgetAdaptor::new(
            Mock::new(Some(Placement::DevicePool), Placement::DevicePool, 3 * MIB),
            Arc::clone(&residency),
        );
        let (class, ptr) = (MemoryClass::Ciphertext, DevicePtr(1 << 40));
        residency.register_managed(AllocationId(1000), class, ptr, 5 * MIB, Advice::NONE);
        drop(residency.prepare(&[AllocationId(1000)]).expect("fits"));
        driver.take();
        let x = 1 + rng.next_u64() % MIB;
        let block = a
            .allocate(&request(1, MemoryClass::Temporary, x))
            .expect("fits");
        let usage = residency.usage();
        assert_eq!((usage.pool_used, usage.pool_reserved), (x, 3 * MIB));
        assert_eq!(usage.device_bytes(), 8 * MIB, "seed {seed}");
        assert_eq!(usage.peak_device, 8 * MIB, "seed {seed}");
        // One more managed MiB fits only once the pool gives back what it
        // holds beyond its live bytes.
        let ptr = DevicePtr(2 << 40);
        residency.register_managed(AllocationId(1001), class, ptr, MIB, Advice::NONE);
        drop(residency.prepare(&[AllocationId(1001)]).expect("fits"));
        assert_eq!(
            driver.take(),
            vec![Call::Begin, Call::Trim(x), Call::ToDevice(1001), Call::End]
        );
        assert_eq!(residency.usage().device_bytes(), x + 6 * MIB);
        a.deallocate(block);
        assert_eq!(residency.usage().pool_used, 0);
    }

    /// An upstream that does not say where a request goes is counted once
    /// it has placed it, and what does not fit is freed and refused.
    #[test]
    fn an_unannounced_placement_is_counted_after_the_fact() {
        let seed = 0x0a11_0c47;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let budget = 4 * MIB;
        let a = budgeted(budget, Mock::new(None, Placement::DevicePool, 1));
        let first = 1 + rng.next_u64() % (2 * MIB);
        let kept = a
            .allocate(&request(1, MemoryClass::Plaintext, first))
            .expect("fits");
        assert_eq!(a.residency().usage().pool_used, first, "seed {seed}");
        let second = budget - first + 1 + rng.next_u64() % MIB;
        let err = a
            .allocate(&request(2, MemoryClass::Constant, second))
            .expect_err("over");
        let Error::OverBudget {
            requested, in_use, ..
        } = err
        else {
            panic!("seed {seed}: expected OverBudget, got {err:?}");
        };
        assert_eq!(requested, second, "seed {seed}");
        assert_eq!(
            in_use.get(MemoryClass::Plaintext, Placement::DevicePool),
            first
        );
        assert_eq!(in_use.total(), first, "seed {seed}");
        // Each attempt was placed, found over, and freed.
        let freed = a.upstream().pool().freed.clone();
        assert!(!freed.is_empty() && freed.iter().all(|id| id.0 == 2));
        assert_eq!(a.upstream().pool().live, first);
        a.deallocate(kept);
        assert_eq!(a.residency().usage().pool_used, 0, "seed {seed}");
    }

    /// Nothing below the adaptor counts: a request the upstream serves
    /// without it leaves the budget untouched.
    #[test]
    fn only_the_adaptor_counts() {
        let a = budgeted(
            4 * MIB,
            Mock::new(Some(Placement::DevicePool), Placement::DevicePool, 1),
        );
        let direct = a
            .upstream()
            .allocate(&request(1, MemoryClass::Temporary, 3 * MIB))
            .expect("the mock has no budget");
        assert_eq!(a.residency().usage().pool_used, 0);
        let counted = a
            .allocate(&request(2, MemoryClass::Temporary, 3 * MIB))
            .expect("fits: the direct block is not the adaptor's");
        assert_eq!(a.residency().usage().pool_used, 3 * MIB);
        a.upstream().deallocate(direct);
        a.deallocate(counted);
        assert_eq!(a.residency().usage().pool_used, 0);
    }

    /// A managed resource handing out freed blocks whose pages are still on
    /// the device: it registers them, and counts nothing.
    #[derive(Debug)]
    struct Reused {
        residency: Arc<Residency>,
    }

    impl MemoryResource for Reused {
        fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
            let ptr = DevicePtr(request.id.0 << 32);
            let (class, bytes) = (request.class, request.bytes as u64);
            self.residency
                .register_managed_on_device(request.id, class, ptr, bytes, Advice::NONE);
            let memory = Memory::Managed(DeviceMemory {
                ptr,
                stream: StreamId::Compute,
            });
            Ok(Allocation::new(request, Placement::Managed, memory))
        }

        fn deallocate(&self, allocation: Allocation) {
            self.residency.unregister_managed(allocation.id);
        }
    }

    /// The adaptor admits a block handed out on the device: resident at
    /// once when room can be made (evicting the least recently used), else
    /// tracked as not resident; never over the budget.
    #[test]
    fn a_block_handed_out_on_the_device_is_admitted_by_the_adaptor() {
        let seed = 0xad_0175;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let budget = 4 * MIB;
        let a = budgeted(budget, Mock::new(None, Placement::Host, 1));
        let residency = Arc::clone(a.residency());
        let a = BudgetAdaptor::new(
            Reused {
                residency: Arc::clone(&residency),
            },
            residency,
        );
        let mut size = || MIB + rng.next_u64() % MIB;
        let first = a
            .allocate(&request(1, MemoryClass::Ciphertext, size()))
            .expect("fits");
        let first_bytes = first.bytes as u64;
        assert_eq!(a.residency().is_resident(first.id), Some(true));
        assert_eq!(a.residency().usage().managed_resident, first_bytes);
        let second = a
            .allocate(&request(2, MemoryClass::Ciphertext, size()))
            .expect("fits");
        assert_eq!(a.residency().is_resident(second.id), Some(true));
        // No room beside both: the first (least recently used) leaves.
        let third = a
            .allocate(&request(3, MemoryClass::Ciphertext, size()))
            .expect("evicts");
        assert_eq!(
            a.residency().is_resident(first.id),
            Some(false),
            "seed {seed}"
        );
        assert_eq!(
            a.residency().is_resident(third.id),
            Some(true),
            "seed {seed}"
        );
        // Everything resident held by an operation: not counted, not resident.
        let _held = a
            .residency()
            .prepare(&[second.id, third.id])
            .expect("resident");
        let fourth = a
            .allocate(&request(4, MemoryClass::Ciphertext, size()))
            .expect("tracked");
        assert_eq!(
            a.residency().is_resident(fourth.id),
            Some(false),
            "seed {seed}"
        );
        let usage = a.residency().usage();
        assert!(usage.peak_device <= budget, "seed {seed}: {usage:?}");
        for block in [first, second, third, fourth] {
            a.deallocate(block);
        }
        assert_eq!(a.residency().usage().managed_resident, 0);
    }
}
