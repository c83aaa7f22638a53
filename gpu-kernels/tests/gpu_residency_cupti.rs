//! The residency manager checked independently with CUPTI's unified-memory
//! counters: a 1 GiB budget, 3 GiB of managed buffers touched in turn by
//! kernels. The manager's accounting never exceeds the budget; in steady
//! state the GPU takes no page fault; the host→device bytes CUPTI sees equal
//! what the manager says it brought back (within 1 %), so every eviction
//! really left the device; every buffer's contents survive, word for word.
//!
//! CUPTI must be set up before the process creates a CUDA context, so this
//! file holds this one test (its own process).

use hemem_gpu_kernels::launch::touch;
use hemem_gpu_kernels::{TestKernels, pattern_word};
use hemem_memory::cuda::cupti::{UnifiedMemoryCounters, UnifiedMemoryTraffic};
use hemem_memory::testing::{gpu_or_skip, gpu_required};
use hemem_memory::{
    Allocator, BudgetSetting, Buffer, ByteSize, MemoryClass, MemoryConfig, Placement, PolicyConfig,
    StreamId,
};

const MIB: usize = 1 << 20;
const BUFFERS: usize = 12;
const BUFFER_BYTES: usize = 256 * MIB;
const ROUNDS: usize = 3;

fn accumulate(total: &mut UnifiedMemoryTraffic, t: &UnifiedMemoryTraffic) {
    total.htod_prefetch_bytes += t.htod_prefetch_bytes;
    total.htod_fault_bytes += t.htod_fault_bytes;
    total.htod_other_bytes += t.htod_other_bytes;
    total.dtoh_prefetch_bytes += t.dtoh_prefetch_bytes;
    total.dtoh_other_bytes += t.dtoh_other_bytes;
    total.gpu_fault_records += t.gpu_fault_records;
    total.gpu_faults += t.gpu_faults;
    total.records += t.records;
    total.dropped += t.dropped;
}

fn within_one_percent(a: u64, b: u64) -> bool {
    let (lo, hi) = (a.min(b), a.max(b));
    hi == 0 || (hi - lo) as f64 <= 0.01 * hi as f64
}

#[test]
fn gpu_budget_holds_and_cupti_agrees_with_the_residency_manager() {
    let name = "gpu_budget_holds_and_cupti_agrees_with_the_residency_manager";
    // Before any context: enable the counters (skipping cleanly without a
    // driver or libcupti).
    let counters = match UnifiedMemoryCounters::enable(0) {
        Ok(c) => Some(c),
        Err(e) => {
            assert!(!gpu_required(), "{name}: CUPTI unavailable: {e}");
            println!("SKIP {name}: no GPU or CUPTI ({e})");
            None
        }
    };
    let Some(counters) = counters else {
        return;
    };
    let Some(device) = gpu_or_skip(name) else {
        return;
    };
    let budget = ByteSize::GIB;
    let config = MemoryConfig {
        policy: PolicyConfig::Static,
        budget: BudgetSetting::Bytes(budget),
        ..MemoryConfig::default()
    };
    let free = device.memory_info().expect("mem info").free;
    assert!(
        (BUFFERS * BUFFER_BYTES) as u64 * 2 < free,
        "not enough free GPU memory for 3 GiB of managed buffers"
    );
    let kernels = TestKernels::load(&device).expect("PTX loads");
    let allocator = Allocator::gpu(&device, &config).expect("allocator");
    let residency = allocator.residency().expect("gpu").clone();

    // Half ciphertexts, half read-mostly evaluation keys.
    let mut buffers: Vec<Buffer> = (0..BUFFERS)
        .map(|i| {
            let class = if i % 2 == 0 {
                MemoryClass::Ciphertext
            } else {
                MemoryClass::EvaluationKey
            };
            allocator
                .allocate(class, BUFFER_BYTES)
                .expect("managed buffer")
        })
        .collect();
    assert!(buffers.iter().all(|b| b.placement() == Placement::Managed));

    // Phase 1: fill every buffer on the device (first touches populate).
    for (i, b) in buffers.iter_mut().enumerate() {
        touch::fill(&kernels, &allocator, b, i as u64).expect("fill");
        assert!(residency.usage().device_bytes() <= budget);
    }
    device.synchronize(StreamId::Compute).expect("sync");
    device.synchronize(StreamId::Copy).expect("sync");
    let warmup = counters.collect().expect("cupti");
    println!("warm-up: {warmup:?}");

    // Phase 2, steady state: read every buffer in turn, ROUNDS times. CUPTI
    // loses unified-memory records beyond about 8191 per burst without a
    // dropped count (DESIGN.md), so the counters are flushed after every
    // buffer (a 256 MiB migration is at most 256 one-MiB records each way).
    let before = allocator.statistics().placement(Placement::Managed);
    let mut traffic = UnifiedMemoryTraffic::default();
    let mut largest_burst = 0;
    for round in 0..ROUNDS {
        for b in &buffers {
            touch::read(&kernels, &allocator, b).expect("read");
            let usage = residency.usage();
            assert!(
                usage.device_bytes() <= budget,
                "round {round}: accounting over budget: {usage:?}"
            );
            device.synchronize(StreamId::Compute).expect("sync");
            device.synchronize(StreamId::Copy).expect("sync");
            let burst = counters.collect().expect("cupti");
            largest_burst = largest_burst.max(burst.records);
            accumulate(&mut traffic, &burst);
        }
    }
    assert!(
        largest_burst < 8000,
        "a CUPTI burst of {largest_burst} records may have lost some"
    );
    let after = allocator.statistics().placement(Placement::Managed);
    let manager_htod = after.prefetched_to_device - before.prefetched_to_device;
    let manager_dtoh = after.prefetched_to_host - before.prefetched_to_host;
    let evictions = after.evictions - before.evictions;
    println!("steady state: {traffic:?}");
    println!(
        "manager: {manager_htod} B to the device, {manager_dtoh} B to the host, {evictions} evictions"
    );
    println!(
        "cupti:   {} B to the device ({} by prefetch, {} by fault), {} B to the host",
        traffic.htod_bytes(),
        traffic.htod_prefetch_bytes,
        traffic.htod_fault_bytes,
        traffic.dtoh_bytes()
    );
    assert!(evictions > 0, "3 GiB under a 1 GiB budget must evict");
    assert_eq!(traffic.dropped, 0, "CUPTI dropped records");
    assert!(
        !traffic.any_gpu_fault(),
        "GPU page faults in steady state: {traffic:?}"
    );
    assert!(
        within_one_percent(traffic.htod_bytes(), manager_htod),
        "host→device: CUPTI {} B vs manager {manager_htod} B",
        traffic.htod_bytes()
    );
    assert!(residency.usage().peak_device <= budget);

    // Phase 3: contents survived every eviction, checked on the device and,
    // for one buffer, word by word on the host.
    for (i, b) in buffers.iter().enumerate() {
        let wrong = touch::count_mismatches(&kernels, &allocator, b, i as u64).expect("verify");
        assert_eq!(wrong, 0, "buffer {i}: {wrong} words changed");
    }
    if let Some(b) = buffers.first() {
        let mut back = vec![0u64; b.words()];
        allocator.download(b, 0, &mut back).expect("download");
        let wrong = back
            .iter()
            .enumerate()
            .filter(|&(j, &w)| w != pattern_word(0, j as u64))
            .count();
        assert_eq!(wrong, 0);
    }
    assert_eq!(device.take_deferred_error(), None);
}
