//! The allocator's tests: host buffers, transfers, sensitive memory, and
//! every policy through the composed chain (on a mock driver where the GPU
//! is absent).

use super::*;
use crate::policy::{DevicePolicy, DynamicPolicy, ManagedPolicy, StaticPolicy};
use crate::residency::ResidencyDriver;
use crate::{DeviceMemory, DevicePtr, Memory};

#[test]
fn buffers_count_while_alive_and_are_freed_on_drop() {
    let a = Allocator::host();
    let b1 = a.allocate(MemoryClass::Ciphertext, 800).expect("alloc");
    let mut b2 = a
        .allocate_sensitive(MemoryClass::EvaluationKey, 64)
        .expect("alloc");
    assert_eq!(b1.words(), 100);
    assert_ne!(b1.id(), b2.id());
    assert_eq!(b2.placement(), Placement::Host);
    assert_eq!(b2.device_ptr(), None);
    b2.host_words_mut().expect("host").fill(7);
    let s = a.statistics();
    assert_eq!(s.class(MemoryClass::Ciphertext).bytes.current, 800);
    assert_eq!(s.total().bytes.current, 864);
    drop(b1);
    drop(b2);
    let s = a.statistics();
    assert_eq!(s.total().bytes.current, 0);
    assert_eq!(s.total().bytes.peak, 864);
    assert_eq!(s.total().frees, 2);
}

#[test]
fn host_transfers_copy_and_check_bounds() {
    let a = Allocator::host();
    let mut x = a.allocate(MemoryClass::Ciphertext, 64).expect("alloc");
    let mut y = a.allocate(MemoryClass::Ciphertext, 64).expect("alloc");
    a.upload(&mut x, 2, &[5, 6, 7]).expect("fits");
    let mut out = [0u64; 3];
    a.download(&x, 2, &mut out).expect("fits");
    assert_eq!(out, [5, 6, 7]);
    a.copy(&x, 2, &mut y, 0, 3).expect("fits");
    assert_eq!(y.host_words().expect("host").get(..3), Some(&[5, 6, 7][..]));
    assert_eq!(
        a.upload(&mut x, 6, &[1, 2, 3]),
        Err(Error::TransferOutOfBounds {
            offset: 6,
            words: 3,
            buffer_words: 8
        })
    );
    assert!(a.copy(&x, 7, &mut y, 0, 2).is_err());
    a.zero(&mut x).expect("zero");
    assert!(x.host_words().expect("host").iter().all(|&w| w == 0));
    let other = Allocator::host();
    assert_eq!(
        other.upload(&mut x, 0, &[1]).map(|_| ()),
        Err(Error::ForeignBuffer { id: x.id() })
    );
    let guard = a.prepare(&[&x, &y]).expect("host buffers pass");
    assert!(guard.ids().is_empty());
    assert_eq!(
        a.allocate(MemoryClass::Temporary, 0).map(|_| ()),
        Err(Error::ZeroSize {
            class: MemoryClass::Temporary
        })
    );
}

/// `words` random words from a seeded ChaCha20 stream (never zeros).
fn random_words(seed: u64, words: usize) -> Vec<u64> {
    use rand_core::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    (0..words).map(|_| rng.next_u64() | 1).collect()
}

/// Whether any word of `words` is one of `pattern`'s.
fn holds_any(words: &[u64], pattern: &[u64]) -> bool {
    let secret: std::collections::HashSet<u64> = pattern.iter().copied().collect();
    words.iter().any(|w| secret.contains(w))
}

#[test]
fn sensitive_host_memory_is_never_handed_out_with_its_words() {
    const SEED: u64 = 0x005e_c2e7;
    println!("seed {SEED:#x}");
    let a = Allocator::host();
    let bytes = 64 * 1024;
    for round in 0..4u64 {
        let pattern = random_words(SEED + round, bytes / 8);
        // Non-sensitive blocks of this size wait in the cache: a
        // sensitive one must not join them.
        let warm: Vec<Buffer> = (0..3)
            .map(|_| a.allocate(MemoryClass::Temporary, bytes).expect("alloc"))
            .collect();
        drop(warm);
        let mut secret = a
            .allocate_sensitive(MemoryClass::Temporary, bytes)
            .expect("alloc");
        assert!(secret.is_sensitive());
        secret
            .host_words_mut()
            .expect("host")
            .copy_from_slice(&pattern);
        if round % 2 == 0 {
            drop(secret);
        } else {
            a.release(secret).expect("released");
        }
        let reused: Vec<Buffer> = (0..6)
            .map(|i| {
                if i % 2 == 0 {
                    a.allocate(MemoryClass::Temporary, bytes)
                } else {
                    a.allocate_sensitive(MemoryClass::Temporary, bytes)
                }
                .expect("alloc")
            })
            .collect();
        for b in &reused {
            assert!(
                !holds_any(b.host_words().expect("host"), &pattern),
                "round {round}: a later allocation holds the secret's words"
            );
        }
    }
    let s = a.statistics();
    assert_eq!(
        s.class(MemoryClass::Temporary).sensitive_allocations,
        4 + 12
    );
    assert_eq!(s.class(MemoryClass::Temporary).sensitive_frees, 4 + 12);
    assert_eq!(a.check(), Ok(()));
}

/// A host resource whose zeroing of sensitive memory always "fails",
/// as a device's would when the driver refuses the memset.
#[derive(Debug)]
struct FailingZeroing {
    host: HostResource,
    zeroing: ZeroingFailures,
}

impl MemoryResource for FailingZeroing {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        self.host.allocate(request)
    }

    fn deallocate(&self, allocation: Allocation) {
        if allocation.needs_zeroing() {
            self.zeroing.record(
                allocation.placement,
                allocation.bytes,
                DeviceError::NoGpu { reason: "test" }.into(),
            );
            // Kept out of reuse: leaked, as a device block would be.
            std::mem::forget(allocation);
            return;
        }
        self.host.deallocate(allocation);
    }
}

#[test]
fn a_failed_zeroing_is_returned_once_by_the_next_fallible_call() {
    let zeroing = ZeroingFailures::default();
    let chain = StatisticsAdaptor::new(FailingZeroing {
        host: HostResource::new(),
        zeroing: zeroing.clone(),
    });
    let statistics = chain.handle();
    let mut a = Allocator::from_parts(Arc::new(chain), statistics);
    a.parts.zeroing = zeroing;
    let expected = Error::ZeroingFailed {
        placement: Placement::Host,
        bytes: 64,
        cause: Box::new(DeviceError::NoGpu { reason: "test" }.into()),
    };

    // Dropped: the failure waits for the next fallible call.
    let mut secret = a
        .allocate_sensitive(MemoryClass::Temporary, 64)
        .expect("alloc");
    secret.host_words_mut().expect("host").fill(0xA5A5);
    drop(secret);
    assert_eq!(
        a.allocate(MemoryClass::Temporary, 64).map(|_| ()),
        Err(expected.clone())
    );
    assert_eq!(a.check(), Ok(()), "reported once");
    let mut b = a.allocate(MemoryClass::Temporary, 64).expect("alloc");

    // Each fallible call reports it, and so does an explicit check.
    for call in 0..3 {
        let s = a
            .allocate_sensitive(MemoryClass::Temporary, 64)
            .expect("alloc");
        drop(s);
        let result = match call {
            0 => a.upload(&mut b, 0, &[1]),
            1 => a.zero(&mut b),
            _ => a.check(),
        };
        assert_eq!(result, Err(expected.clone()), "call {call}");
    }

    // Released: zeroed by the allocator itself, nothing left to fail.
    let s = a
        .allocate_sensitive(MemoryClass::Temporary, 64)
        .expect("alloc");
    assert_eq!(a.release(s), Ok(()));
    assert_eq!(a.check(), Ok(()));
    let other = Allocator::host();
    let foreign = other
        .allocate_sensitive(MemoryClass::Temporary, 64)
        .expect("alloc");
    let id = foreign.id();
    assert_eq!(a.release(foreign), Err(Error::ForeignBuffer { id }));
}

/// A device resource without a device: fake addresses, with the managed
/// resource's registration (the budget adaptor counts pooled bytes).
#[derive(Debug)]
struct FakeDevice {
    placement: Placement,
    residency: Arc<Residency>,
    policy: Arc<dyn PlacementPolicy>,
}

impl MemoryResource for FakeDevice {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        let bytes = request.bytes as u64;
        let memory = DeviceMemory {
            ptr: DevicePtr(request.id.0 << 32),
            stream: request.stream,
        };
        if self.placement == Placement::DevicePool {
            Ok(Allocation::new(
                request,
                self.placement,
                Memory::DevicePool(memory),
            ))
        } else {
            let advice = self.policy.advice(request.class);
            self.residency
                .register_managed(request.id, request.class, memory.ptr, bytes, advice);
            Ok(Allocation::new(
                request,
                self.placement,
                Memory::Managed(memory),
            ))
        }
    }

    fn deallocate(&self, allocation: Allocation) {
        if self.placement == Placement::Managed {
            self.residency.unregister_managed(allocation.id);
        }
    }
}

use crate::Allocation;

/// The GPU chain over fake device resources and a given residency driver.
pub(crate) fn fake_gpu(
    policy: Arc<dyn PlacementPolicy>,
    budget: u64,
    driver: Box<dyn ResidencyDriver>,
) -> Allocator {
    let statistics = StatisticsHandle::default();
    let residency = Arc::new(Residency::new(
        budget,
        policy.prefetches_on_use(),
        policy.eviction(),
        driver,
        statistics.clone(),
    ));
    let fake = |placement| FakeDevice {
        placement,
        residency: Arc::clone(&residency),
        policy: Arc::clone(&policy),
    };
    let router = Router::new(Arc::clone(&policy))
        .with(Placement::DevicePool, fake(Placement::DevicePool))
        .with(Placement::Managed, fake(Placement::Managed));
    let budgeted = BudgetAdaptor::new(router, Arc::clone(&residency));
    let counted = StatisticsAdaptor::with_handle(budgeted, statistics.clone());
    let traced = TraceAdaptor::new(counted, true);
    let trace = traced.handle();
    let mut a = Allocator::from_parts(Arc::new(traced), statistics);
    a.parts = Parts {
        device: None,
        pool: None,
        residency: Some(residency),
        policy: Some(policy),
        trace: Some(trace),
        trace_path: None,
        zeroing: ZeroingFailures::default(),
    };
    a
}

const MIB: usize = 1 << 20;

#[test]
fn every_policy_allocates_frees_and_reuses_through_the_chain() {
    use crate::residency::NullDriver;
    let policies: Vec<Arc<dyn PlacementPolicy>> = vec![
        Arc::new(DevicePolicy),
        Arc::new(ManagedPolicy),
        Arc::new(StaticPolicy),
        Arc::new(DynamicPolicy::new(2).expect("valid")),
    ];
    for policy in policies {
        let name = policy.name();
        let a = fake_gpu(policy, (64 * MIB) as u64, Box::new(NullDriver));
        for _ in 0..20 {
            let t = a.allocate(MemoryClass::Temporary, MIB).expect(name);
            let c = a.allocate(MemoryClass::Ciphertext, 2 * MIB).expect(name);
            let _g = a.prepare(&[&t, &c]).expect(name);
        }
        let s = a.statistics();
        assert_eq!(s.total().allocations, 40, "{name}");
        assert_eq!(s.total().frees, 40, "{name}");
        assert_eq!(s.total().bytes.current, 0, "{name}");
        let usage = a.residency_usage().expect("gpu");
        assert_eq!(usage.pool_used, 0, "{name}");
        assert_eq!(usage.managed_allocated, 0, "{name}");
        assert!(usage.peak_device <= (64 * MIB) as u64, "{name}");
        let trace = a.trace().expect("recording");
        assert_eq!(trace.records.len(), 40, "{name}");
        assert!(trace.records.iter().all(|r| r.free_ns.is_some()), "{name}");
    }
}

#[test]
fn device_policy_over_budget_reports_what_is_in_use() {
    use crate::residency::NullDriver;
    let a = fake_gpu(
        Arc::new(DevicePolicy),
        (4 * MIB) as u64,
        Box::new(NullDriver),
    );
    let _keep = a
        .allocate(MemoryClass::EvaluationKey, 3 * MIB)
        .expect("fits");
    let err = a
        .allocate(MemoryClass::Temporary, 2 * MIB)
        .expect_err("over budget");
    let Error::OverBudget {
        requested,
        placing,
        budget,
        in_use,
    } = err
    else {
        panic!("expected OverBudget, got {err:?}");
    };
    assert_eq!((requested, budget), ((2 * MIB) as u64, (4 * MIB) as u64));
    assert_eq!(placing, Some(MemoryClass::Temporary));
    assert_eq!(
        in_use.get(MemoryClass::EvaluationKey, Placement::DevicePool),
        (3 * MIB) as u64
    );
    assert_eq!(in_use.total(), (3 * MIB) as u64);
}

/// A budget already used up when a setup allocation comes (issue 15:
/// the refusal once read "0 bytes requested"): the error names the
/// request's own bytes and class, for random sizes and classes.
#[test]
fn an_exhausted_budget_names_what_it_refused() {
    use rand_core::{Rng as _, SeedableRng as _};

    use crate::residency::NullDriver;
    let seed = 0x0b_0d6e7;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    for _ in 0..8 {
        let budget = MIB * (1 + rng.next_u64() as usize % 8);
        let a = fake_gpu(Arc::new(DevicePolicy), budget as u64, Box::new(NullDriver));
        // The whole budget is taken before the request.
        let _setup = a
            .allocate(MemoryClass::Constant, budget)
            .expect("the budget itself fits");
        let bytes = 1 + rng.next_u64() as usize % (4 * MIB);
        let class = *MemoryClass::ALL
            .get(rng.next_u64() as usize % MemoryClass::ALL.len())
            .expect("a class");
        let err = a.allocate(class, bytes).expect_err("no room left");
        let Error::OverBudget {
            requested, placing, ..
        } = &err
        else {
            panic!("seed {seed}: expected OverBudget, got {err:?}");
        };
        assert_eq!(*requested, bytes as u64, "seed {seed}");
        assert_eq!(*placing, Some(class), "seed {seed}");
        let message = err.to_string();
        assert!(
            message.starts_with(&format!(
                "over the device budget: {bytes} bytes of class {class} requested"
            )),
            "seed {seed}: {message}"
        );
    }
}

#[test]
fn budgeted_pool_allocations_evict_managed_buffers() {
    use crate::residency::driver::mock::{Call, RecordingDriver};
    let driver = RecordingDriver::default();
    let a = fake_gpu(
        Arc::new(StaticPolicy),
        (4 * MIB) as u64,
        Box::new(driver.clone()),
    );
    let k1 = a
        .allocate(MemoryClass::EvaluationKey, 2 * MIB)
        .expect("managed");
    let k2 = a
        .allocate(MemoryClass::EvaluationKey, 2 * MIB)
        .expect("managed");
    drop(a.prepare(&[&k1]).expect("fits"));
    drop(a.prepare(&[&k2]).expect("fits"));
    driver.take();
    // 4 MiB resident: a 1 MiB scratch buffer needs k1 (least recent) out.
    let t = a.allocate(MemoryClass::Temporary, MIB).expect("evicts k1");
    assert_eq!(t.placement(), Placement::DevicePool);
    let (k1_id, k2_id) = (k1.id().0, k2.id().0);
    assert_eq!(
        driver.take(),
        vec![
            Call::Begin,
            Call::ReadMostly(k1_id, false),
            Call::ToHost(k1_id),
            Call::End
        ]
    );
    // Both keys declared with the scratch buffer alive: cannot fit.
    assert!(matches!(
        a.prepare(&[&k1, &k2]),
        Err(Error::OverBudget { .. })
    ));
    assert_eq!(
        a.residency_usage().map(|u| u.device_bytes()),
        Some((3 * MIB) as u64)
    );
    let _ = k2_id;
}
