//! The budget adaptor's tests: mock upstreams that count nothing, under
//! the adaptor that counts everything.

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
    /// Requests above this are refused when placement is asked.
    limit: usize,
    pool: Mutex<Pool>,
}

impl Mock {
    fn new(announces: Option<Placement>, places: Placement, granule: u64) -> Self {
        Self {
            announces,
            places,
            granule,
            limit: usize::MAX,
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

    fn placement(&self, request: &AllocRequest) -> Result<Option<Placement>> {
        if request.bytes > self.limit {
            return Err(Error::TooLarge {
                requested: request.bytes,
                limit: self.limit,
                class: request.class,
            });
        }
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

/// A managed resource that registers its blocks — handed out again with
/// their pages on the device (`on_device`), or fresh — and counts nothing.
#[derive(Debug)]
struct Reused {
    residency: Arc<Residency>,
    on_device: bool,
    /// Bytes of freed blocks it keeps "resident" (as a cache would).
    kept: std::sync::atomic::AtomicU64,
}

impl MemoryResource for Reused {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        let ptr = DevicePtr(request.id.0 << 32);
        let (id, class, bytes) = (request.id, request.class, request.bytes as u64);
        let advice = Advice::for_class(class);
        if self.on_device {
            self.residency
                .register_managed_on_device(id, class, ptr, bytes, advice);
        } else {
            self.residency
                .register_managed(id, class, ptr, bytes, advice);
        }
        let memory = Memory::Managed(DeviceMemory {
            ptr,
            stream: StreamId::Compute,
        });
        Ok(Allocation::new(request, Placement::Managed, memory))
    }

    fn deallocate(&self, allocation: Allocation) {
        // As the real resource: a freed block keeps pages on the device
        // only if it had them.
        let resident = self.residency.is_resident(allocation.id) == Some(true);
        self.residency.unregister_managed(allocation.id);
        if resident {
            self.kept.fetch_add(
                allocation.bytes as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    }

    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        (placement == Placement::Managed)
            .then(|| self.kept.load(std::sync::atomic::Ordering::Relaxed))
    }
}

fn managed(budget: u64, on_device: bool) -> BudgetAdaptor<Reused> {
    let a = budgeted(budget, Mock::new(None, Placement::Host, 1));
    let residency = Arc::clone(a.residency());
    BudgetAdaptor::new(
        Reused {
            residency: Arc::clone(&residency),
            on_device,
            kept: std::sync::atomic::AtomicU64::new(0),
        },
        residency,
    )
}

/// The adaptor admits a block handed out on the device: resident at
/// once when room can be made (evicting the least recently used), else
/// tracked as not resident; never over the budget.
#[test]
fn a_block_handed_out_on_the_device_is_admitted_by_the_adaptor() {
    let seed = 0xad_0175;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let budget = 4 * MIB;
    let a = managed(budget, true);
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

/// Constant tables are counted from their allocation to their free and
/// never evicted (kernels read them without declaring them); one that
/// cannot fit is refused with its class.
#[test]
fn constant_tables_count_for_their_whole_life() {
    use crate::residency::driver::mock::{Call, RecordingDriver};
    let seed = 0xc0_7ab1e;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let budget = 8 * MIB;
    let driver = RecordingDriver::default();
    let residency = Arc::new(Residency::new(
        budget,
        true,
        Eviction::default(),
        Box::new(driver.clone()),
        StatisticsHandle::default(),
    ));
    let a = BudgetAdaptor::new(
        Reused {
            residency: Arc::clone(&residency),
            on_device: false,
            kept: std::sync::atomic::AtomicU64::new(0),
        },
        Arc::clone(&residency),
    );
    let table_bytes = MIB + rng.next_u64() % MIB;
    let table = a
        .allocate(&request(1, MemoryClass::Constant, table_bytes))
        .expect("fits");
    assert_eq!(residency.is_resident(table.id), Some(true), "seed {seed}");
    let in_use = residency.in_use();
    assert_eq!(
        in_use.get(MemoryClass::Constant, Placement::Managed),
        table_bytes
    );
    assert_eq!(
        driver.take(),
        vec![
            Call::Begin,
            Call::ReadMostly(1, true),
            Call::ToDevice(1),
            Call::End
        ]
    );
    // A ciphertext is counted when declared, as before.
    let ct_bytes = 4 * MIB + rng.next_u64() % MIB;
    let ct = a
        .allocate(&request(2, MemoryClass::Ciphertext, ct_bytes))
        .expect("registered");
    assert_eq!(residency.is_resident(ct.id), Some(false));
    drop(residency.prepare(&[ct.id]).expect("fits"));
    driver.take();
    // Another ciphertext needs room: the older ciphertext leaves, never
    // the table, though the table was used longer ago.
    let other = a
        .allocate(&request(3, MemoryClass::Ciphertext, ct_bytes))
        .expect("registered");
    drop(residency.prepare(&[other.id]).expect("fits"));
    assert!(driver.take().contains(&Call::ToHost(2)), "seed {seed}");
    assert_eq!(residency.is_resident(table.id), Some(true));
    // With the ciphertext held, a second table cannot fit: refused.
    let _held = residency.prepare(&[other.id]).expect("resident");
    let big = budget - ct_bytes - table_bytes + 1 + rng.next_u64() % MIB;
    match a.allocate(&request(4, MemoryClass::Constant, big)) {
        Err(Error::OverBudget {
            requested, placing, ..
        }) => {
            assert_eq!((requested, placing), (big, Some(MemoryClass::Constant)));
        }
        other => panic!("seed {seed}: expected OverBudget, got {other:?}"),
    }
    assert!(residency.usage().peak_device <= budget, "seed {seed}");
    a.deallocate(table);
    a.deallocate(ct);
    a.deallocate(other);
    assert_eq!(residency.usage().managed_resident, 0);
    assert_eq!(residency.usage().managed_allocated, 0);
}

/// What the upstream refuses when asked where it would place a request (a
/// request larger than the device) keeps its own error, and a request
/// larger than the budget but not the device is over the budget; neither
/// leaves a byte counted.
#[test]
fn the_upstreams_own_refusals_come_before_the_budget() {
    let mut mock = Mock::new(Some(Placement::DevicePool), Placement::DevicePool, MIB);
    mock.limit = (1024 * MIB) as usize;
    let adaptor = budgeted(64 * MIB, mock);
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0xb0d6);
    for id in 0..50 {
        let class = random_class(&mut rng);
        let huge = 1024 * MIB + 1 + rng.next_u64() % (1 << 40);
        assert!(matches!(
            adaptor.allocate(&request(2 * id, class, huge)),
            Err(Error::TooLarge { .. })
        ));
        let over = 64 * MIB + 1 + rng.next_u64() % (960 * MIB);
        assert!(matches!(
            adaptor.allocate(&request(2 * id + 1, class, over)),
            Err(Error::OverBudget { .. })
        ));
    }
    let usage = adaptor.residency().usage();
    assert_eq!((usage.pool_used, adaptor.upstream().pool().live), (0, 0));
}

/// What the managed upstream keeps after a free (its `held_bytes`) is what
/// the budget counts as kept, in the device bytes.
#[test]
fn freed_managed_blocks_kept_by_the_upstream_count() {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0x6e98);
    let adaptor = managed(64 * MIB, true);
    let mut total = 0;
    for n in 0..20 {
        let bytes = MIB + rng.next_u64() % MIB;
        let block = adaptor
            .allocate(&request(n, MemoryClass::Ciphertext, bytes))
            .expect("fits");
        adaptor.deallocate(block);
        total += bytes;
        let usage = adaptor.residency().usage();
        assert_eq!(usage.managed_kept, total);
        assert_eq!(usage.device_bytes(), total);
    }
}
