//! Every policy allocates, frees and reuses memory on the GPU; the device
//! policy over budget fails with the out-of-memory error; bad requests are
//! typed errors; sensitive memory is zeroed.
#![expect(clippy::expect_used, reason = "test helpers outside #[test] functions")]

use std::time::Duration;

use hemem_memory::policy::Divergence;
use hemem_memory::testing::gpu_or_skip;
use hemem_memory::{
    Allocator, BudgetSetting, ByteSize, Error, GpuDevice, MemoryClass, MemoryConfig, Placement,
    PolicyConfig, PoolKind, ProfiledConfig, StreamingPlan,
};

const MIB: usize = 1 << 20;
/// Rounds per policy: enough for the dynamic policy's history (10) to fill.
const ROUNDS: u64 = 12;

fn config(policy: PolicyConfig, budget: u64) -> MemoryConfig {
    MemoryConfig {
        policy,
        budget: BudgetSetting::Bytes(budget),
        ..MemoryConfig::default()
    }
}

fn pattern(seed: u64, words: usize) -> Vec<u64> {
    (0..words as u64)
        .map(|i| (seed ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect()
}

/// Allocates, writes, reads back and frees a scratch and a ciphertext buffer
/// `rounds` times; checks the contents and that once the pool has held
/// memory it stops growing (freed memory is reused).
fn exercise(device: &GpuDevice, allocator: &Allocator, rounds: u64) {
    let mut previous: Option<u64> = None;
    for round in 0..rounds {
        let mut t = allocator
            .allocate(MemoryClass::Temporary, 16 * MIB)
            .expect("scratch");
        let mut c = allocator
            .allocate(MemoryClass::Ciphertext, 8 * MIB)
            .expect("ciphertext");
        let (pt, pc) = (pattern(round, t.words()), pattern(!round, c.words()));
        allocator.upload(&mut t, 0, &pt).expect("upload");
        allocator.upload(&mut c, 0, &pc).expect("upload");
        let mut back = vec![0u64; t.words()];
        allocator.download(&t, 0, &mut back).expect("download");
        assert!(back == pt, "scratch contents, round {round}");
        let mut back = vec![0u64; c.words()];
        allocator.download(&c, 0, &mut back).expect("download");
        assert!(back == pc, "ciphertext contents, round {round}");
        let pooled_now = [&t, &c]
            .iter()
            .any(|b| b.placement() == Placement::DevicePool);
        drop((t, c));
        let usage = allocator.residency_usage().expect("gpu allocator");
        assert!(usage.device_bytes() <= usage.budget);
        // The driver's figure: freed blocks stay in the pool and are reused.
        let reserved = allocator
            .pool_reserved_bytes()
            .expect("pool attribute")
            .expect("pool");
        if let Some(before) = previous
            && before > 0
            && pooled_now
        {
            assert_eq!(reserved, before, "pool reused, round {round}");
        }
        previous = Some(reserved);
    }
    let s = allocator.statistics();
    assert_eq!(s.total().allocations, 2 * rounds);
    assert_eq!(s.total().frees, 2 * rounds);
    assert_eq!(s.total().bytes.current, 0);
    assert_eq!(device.take_deferred_error(), None);
}

#[test]
fn gpu_every_policy_allocates_frees_and_reuses_memory() {
    let Some(device) = gpu_or_skip("gpu_every_policy_allocates_frees_and_reuses_memory") else {
        return;
    };
    let budget = ByteSize::GIB;
    let dir = std::env::temp_dir().join(format!("hemem-gpu-policies-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let recording = dir.join("static.csv");
    // Record a static run, for the profiled replay below.
    let mut record = config(PolicyConfig::Static, budget);
    record.record_trace = Some(recording.clone());
    let recorder = Allocator::gpu(&device, &record).expect("static allocator");
    exercise(&device, &recorder, ROUNDS);
    recorder.write_trace().expect("trace written");
    drop(recorder);

    let profiled = PolicyConfig::Profiled(ProfiledConfig {
        trace: recording,
        lifetime_threshold: Duration::from_secs(1),
        peak_pool_cap: None,
        on_divergence: Divergence::Error,
    });
    for policy in [
        PolicyConfig::Device,
        PolicyConfig::Managed,
        PolicyConfig::Static,
        PolicyConfig::Dynamic { threshold: 2 },
        profiled,
    ] {
        let name = policy.kind().name();
        println!("policy {name}");
        let allocator = Allocator::gpu(&device, &config(policy, budget)).expect(name);
        exercise(&device, &allocator, ROUNDS);
        let s = allocator.statistics();
        let pooled = s.placement(Placement::DevicePool).allocations;
        let managed = s.placement(Placement::Managed).allocations;
        match name {
            "device" => assert_eq!((pooled, managed), (24, 0)),
            "managed" => assert_eq!((pooled, managed), (0, 24)),
            "static" => assert_eq!((pooled, managed), (12, 12)),
            // Each size is freed before its next allocation (live count 0):
            // managed until the 10-entry history is full, pooled from the
            // 10th allocation on.
            "dynamic" => assert_eq!((pooled, managed), (6, 18)),
            // Every allocation of the recording was short-lived: all pooled.
            "profiled" => assert_eq!((pooled, managed), (24, 0)),
            _ => {}
        }
    }
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn gpu_device_policy_over_budget_is_an_out_of_memory_error() {
    let Some(device) = gpu_or_skip("gpu_device_policy_over_budget_is_an_out_of_memory_error")
    else {
        return;
    };
    let budget = 256 * ByteSize::MIB;
    let allocator = Allocator::gpu(&device, &config(PolicyConfig::Device, budget)).expect("alloc");
    let keys = allocator
        .allocate(MemoryClass::EvaluationKey, 200 * MIB)
        .expect("fits");
    let err = allocator
        .allocate(MemoryClass::Temporary, 100 * MIB)
        .expect_err("over budget");
    println!("{err}");
    let Error::OverBudget {
        requested,
        budget: b,
        in_use,
        ..
    } = err
    else {
        panic!("expected OverBudget, got {err}");
    };
    assert_eq!((requested, b), ((100 * MIB) as u64, budget));
    assert_eq!(
        in_use.get(MemoryClass::EvaluationKey, Placement::DevicePool),
        (200 * MIB) as u64
    );
    drop(keys);
    // Freed memory is pooled again: the same request now fits.
    let again = allocator.allocate(MemoryClass::Temporary, 100 * MIB);
    assert!(again.is_ok());
}

/// Free room in pieces under a hard cap: 16 blocks of 4 MiB fill a 64 MiB
/// budget, every other one is freed, and a 24 MiB block must fit in the
/// 32 MiB left in 4 MiB pieces. The paged pool remaps the freed pages into
/// one range; the live blocks keep their words, and the new block holds
/// what is written to it. The driver's pool is run too, for the record
/// (it may refuse: its free memory lies in pieces).
#[test]
fn gpu_paged_pool_backs_a_block_with_free_room_left_in_pieces() {
    let Some(device) = gpu_or_skip("gpu_paged_pool_backs_a_block_with_free_room_left_in_pieces")
    else {
        return;
    };
    for kind in [PoolKind::Paged, PoolKind::Driver] {
        let budget = 64 * ByteSize::MIB;
        let settings = MemoryConfig {
            device_pool: kind,
            ..config(PolicyConfig::Device, budget)
        };
        let allocator = Allocator::gpu(&device, &settings).expect("alloc");
        let mut blocks: Vec<_> = (0..16u64)
            .map(|i| {
                let mut b = allocator
                    .allocate(MemoryClass::Ciphertext, 4 * MIB)
                    .expect("fits the budget");
                let words = pattern(i, b.words());
                allocator.upload(&mut b, 0, &words).expect("upload");
                (i, b)
            })
            .collect();
        let kept: Vec<_> = blocks.drain(..).filter(|(i, _)| i % 2 == 1).collect();
        let big = allocator.allocate(MemoryClass::Temporary, 24 * MIB);
        println!("{kind}: a 24 MiB block in 32 MiB free in 4 MiB pieces: {big:?}");
        match (kind, big) {
            (_, Ok(mut big)) => {
                let words = pattern(99, big.words());
                allocator.upload(&mut big, 0, &words).expect("upload");
                let mut back = vec![0u64; big.words()];
                allocator.download(&big, 0, &mut back).expect("download");
                assert!(back == words, "{kind}: the remapped block's words");
            }
            (PoolKind::Paged, Err(e)) => panic!("paged pool refused: {e}"),
            (PoolKind::Driver, Err(_)) => {}
        }
        for (i, b) in &kept {
            let mut back = vec![0u64; b.words()];
            allocator.download(b, 0, &mut back).expect("download");
            assert!(back == pattern(*i, b.words()), "{kind}: block {i} kept");
        }
        let peak = allocator
            .pool_reserved_peak_bytes()
            .expect("driver")
            .expect("pool");
        assert!(peak <= budget, "{kind}: peak {peak} over {budget}");
        drop(kept);
        assert_eq!(device.take_deferred_error(), None);
    }
}

#[test]
fn gpu_zero_size_and_absurd_requests_are_typed_errors() {
    let Some(device) = gpu_or_skip("gpu_zero_size_and_absurd_requests_are_typed_errors") else {
        return;
    };
    let allocator =
        Allocator::gpu(&device, &config(PolicyConfig::Static, ByteSize::GIB)).expect("alloc");
    assert_eq!(
        allocator.allocate(MemoryClass::Ciphertext, 0).map(|_| ()),
        Err(Error::ZeroSize {
            class: MemoryClass::Ciphertext
        })
    );
    let absurd = 1usize << 50;
    assert!(matches!(
        allocator.allocate(MemoryClass::Temporary, absurd),
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(
        allocator.allocate(MemoryClass::Ciphertext, absurd),
        Err(Error::ManagedCapExceeded { .. })
    ));
}

#[test]
fn gpu_sensitive_memory_is_zeroed_before_reuse() {
    let Some(device) = gpu_or_skip("gpu_sensitive_memory_is_zeroed_before_reuse") else {
        return;
    };
    for policy in [PolicyConfig::Device, PolicyConfig::Managed] {
        let allocator = Allocator::gpu(&device, &config(policy, ByteSize::GIB)).expect("allocator");
        let mut secret = allocator
            .allocate_sensitive(MemoryClass::EvaluationKey, 4 * MIB)
            .expect("alloc");
        let words = secret.words();
        allocator
            .upload(&mut secret, 0, &vec![0xDEAD_BEEF_u64; words])
            .expect("upload");
        let ptr = secret.device_ptr();
        drop(secret);
        let again = allocator
            .allocate(MemoryClass::EvaluationKey, 4 * MIB)
            .expect("alloc");
        if again.device_ptr() == ptr {
            let mut back = vec![1u64; words];
            allocator.download(&again, 0, &mut back).expect("download");
            assert!(back.iter().all(|&w| w == 0), "reused block was not zeroed");
        } else {
            println!("note: the block was not reused, nothing to compare");
        }
    }
}

/// The `planned` policy streams read-only objects larger in total than the
/// budget through pooled slots: every read sees the uploaded words (from the
/// pinned master, after any number of evictions), an object written on the
/// device before it was sealed comes back with the device's words, the look-
/// ahead fetches ahead once a phase repeats, and neither hemem's accounting
/// nor the driver's own pool peak ever exceeds the budget.
#[test]
fn gpu_planned_streams_objects_bit_exact_under_a_hard_budget() {
    let Some(device) = gpu_or_skip("gpu_planned_streams_objects_bit_exact_under_a_hard_budget")
    else {
        return;
    };
    let budget = 64 * ByteSize::MIB;
    let allocator =
        Allocator::gpu(&device, &config(PolicyConfig::Planned, budget)).expect("allocator");
    assert_eq!(allocator.policy_name(), Some("planned"));
    // Twelve 7 MiB keys: 84 MiB of keys for a 64 MiB budget.
    let words = 7 * MIB / 8;
    let mut keys = Vec::new();
    let mut expected = Vec::new();
    for k in 0..12u64 {
        let mut key = allocator
            .allocate(MemoryClass::EvaluationKey, words * 8)
            .expect("streamed");
        assert_eq!(key.placement(), Placement::Streamed);
        let data = pattern(0x5eed + k, words);
        allocator
            .upload(&mut key, 0, &data)
            .expect("upload to the master");
        allocator.seal(&key).expect("sealed");
        keys.push(key);
        expected.push(data);
    }
    // A diagonal written on the device (a copy from a pooled buffer) before
    // it is sealed: its words must survive its evictions.
    let mut scratch = allocator
        .allocate(MemoryClass::Temporary, words * 8)
        .expect("scratch");
    let written = pattern(0xd1a9, words);
    allocator.upload(&mut scratch, 0, &written).expect("upload");
    let mut diagonal = allocator
        .allocate(MemoryClass::BootstrapConstant, words * 8)
        .expect("streamed");
    allocator
        .copy(&scratch, 0, &mut diagonal, 0, words)
        .expect("device copy");
    drop(scratch);
    let mut back = vec![0u64; words];
    for phase in 0..4 {
        let _phase = allocator.phase(7, 1);
        for (k, key) in keys.iter().enumerate() {
            allocator.download(key, 0, &mut back).expect("download");
            assert!(back == expected[k], "key {k}, phase {phase}");
            if k % 4 == 3 {
                allocator
                    .download(&diagonal, 0, &mut back)
                    .expect("download");
                assert!(back == written, "diagonal, phase {phase}");
            }
        }
    }
    let usage = allocator.residency_usage().expect("gpu allocator");
    println!("{usage:?}");
    assert!(usage.prefetched > 0, "the look-ahead fetched nothing ahead");
    assert!(usage.peak_device <= budget, "{usage:?}");
    let peak = allocator
        .pool_reserved_peak_bytes()
        .expect("driver")
        .expect("pool");
    println!("pool peak by the driver: {peak} of {budget}");
    assert!(
        peak <= budget,
        "the driver's pool peak {peak} exceeds {budget}"
    );
    let s = allocator.statistics();
    let cell = s.get(MemoryClass::EvaluationKey, Placement::Streamed);
    assert!(
        cell.evictions > 0 && cell.prefetched_to_device > 0,
        "{cell:?}"
    );
    // One object larger than the whole budget is a typed error.
    let mut huge = allocator
        .allocate(MemoryClass::EvaluationKey, 80 * MIB)
        .expect("masters live on the host");
    let err = allocator.zero(&mut huge).expect_err("over budget");
    assert!(matches!(err, Error::OverBudget { .. }), "{err}");
}

/// The run a phase records is timed on the device (compute-stream events
/// at its steps' boundaries, copy-stream events around its fetches): the
/// stall plan gets its model's figures, with a measured copy rate, and the
/// runs that follow its split keep every object's words.
#[test]
fn gpu_a_recorded_phase_is_timed_for_the_stall_plan() {
    let Some(device) = gpu_or_skip("gpu_a_recorded_phase_is_timed_for_the_stall_plan") else {
        return;
    };
    let budget = 64 * ByteSize::MIB;
    let config = MemoryConfig {
        streaming_plan: StreamingPlan::Stalls,
        ..config(PolicyConfig::Planned, budget)
    };
    let allocator = Allocator::gpu(&device, &config).expect("allocator");
    // Twelve 7 MiB keys under a 64 MiB budget.
    let words = 7 * MIB / 8;
    let mut keys = Vec::new();
    for k in 0..12u64 {
        let mut key = allocator
            .allocate(MemoryClass::EvaluationKey, words * 8)
            .expect("streamed");
        allocator
            .upload(&mut key, 0, &pattern(0x7157 + k, words))
            .expect("upload to the master");
        allocator.seal(&key).expect("sealed");
        keys.push(key);
    }
    let mut back = vec![0u64; words];
    for phase in 0..3 {
        let _phase = allocator.phase(11, 1);
        for (k, key) in keys.iter().enumerate() {
            allocator.download(key, 0, &mut back).expect("download");
            assert!(
                back == pattern(0x7157 + k as u64, words),
                "key {k}, phase {phase}"
            );
        }
    }
    let usage = allocator.residency_usage().expect("gpu allocator");
    println!("{usage:?}");
    assert_eq!(usage.streaming_plan, StreamingPlan::Stalls);
    let (run, window) = (
        usage.planned_run_ns.expect("the recorded run was timed"),
        usage.window_run_ns.expect("the window split modelled"),
    );
    assert!(run > 0 && run <= window, "{usage:?}");
    assert!(
        usage.planned_stall_ns.is_some_and(|s| s <= run),
        "{usage:?}"
    );
    assert_eq!(usage.model_copy_rate_measured, Some(true), "{usage:?}");
    let rate = usage.model_copy_rate.expect("a rate");
    println!(
        "copy rate measured on the recorded run: {:.1} GB/s",
        rate as f64 / 1e9
    );
    assert!(
        (1_000_000_000..1_000_000_000_000).contains(&rate),
        "{usage:?}"
    );
    assert!(usage.peak_device <= budget, "{usage:?}");
}

/// `words` random words from a seeded ChaCha20 stream (never zero).
fn random_words(seed: u64, words: usize) -> Vec<u64> {
    use rand_core::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    (0..words).map(|_| rng.next_u64() | 1).collect()
}

/// How many words of `words` are one of `pattern`'s.
fn count_secret_words(words: &[u64], pattern: &[u64]) -> usize {
    let secret: std::collections::HashSet<u64> = pattern.iter().copied().collect();
    words.iter().filter(|w| secret.contains(w)).count()
}

/// A sensitive buffer holding random words is dropped (or released), and
/// blocks of the same size allocated next from the same allocator — the
/// freed block itself when the pool or the managed cache hands it out again
/// — hold none of its words, under every policy; the pinned staging ring an
/// upload of the secret went through holds none either, and no zeroing
/// failed.
#[test]
fn gpu_sensitive_memory_holds_no_secret_after_release_in_every_placement() {
    let name = "gpu_sensitive_memory_holds_no_secret_after_release_in_every_placement";
    let Some(device) = gpu_or_skip(name) else {
        return;
    };
    const SEED: u64 = 0x005e_c2e7_0014;
    println!("seed {SEED:#x}");
    let mut round = 0u64;
    for policy in [
        PolicyConfig::Planned,
        PolicyConfig::Device,
        PolicyConfig::Managed,
        PolicyConfig::Static,
    ] {
        let policy_name = policy.kind().name();
        let allocator = Allocator::gpu(&device, &config(policy, ByteSize::GIB)).expect("allocator");
        for class in [
            MemoryClass::Temporary,
            MemoryClass::EvaluationKey,
            MemoryClass::Plaintext,
        ] {
            for release in [false, true] {
                round += 1;
                let bytes = 3 * MIB + 8 * (round as usize);
                let mut secret = allocator
                    .allocate_sensitive(class, bytes)
                    .expect("sensitive allocation");
                let pattern = random_words(SEED + round, secret.words());
                allocator.upload(&mut secret, 0, &pattern).expect("upload");
                let staging = hemem_memory::testing::staging_words(&device)
                    .expect("staging")
                    .expect("the upload made the ring");
                assert_eq!(
                    count_secret_words(&staging, &pattern),
                    0,
                    "{policy_name} {class}: secret words left in pinned staging"
                );
                let ptr = secret.device_ptr();
                let placement = secret.placement();
                if release {
                    allocator.release(secret).expect("release");
                } else {
                    drop(secret);
                }
                let again: Vec<_> = (0..4)
                    .map(|_| allocator.allocate(class, bytes).expect("allocation"))
                    .collect();
                let reused = again.iter().any(|b| b.device_ptr() == ptr);
                println!(
                    "{policy_name} {class} in {placement} (release: {release}): block reused: {reused}"
                );
                for b in &again {
                    let mut back = vec![0u64; b.words()];
                    allocator.download(b, 0, &mut back).expect("download");
                    assert_eq!(
                        count_secret_words(&back, &pattern),
                        0,
                        "{policy_name} {class}: a later allocation holds the secret's words"
                    );
                }
            }
        }
        let s = allocator.statistics();
        assert_eq!(s.total().sensitive_allocations, 6, "{policy_name}");
        assert_eq!(s.total().sensitive_frees, 6, "{policy_name}");
        assert_eq!(allocator.check(), Ok(()), "{policy_name}: zeroing failed");
    }
    assert_eq!(device.take_deferred_error(), None);
}

/// A sensitive block of the pinned arena is zeroed before the arena hands
/// the same words out again (first fit returns the same block).
#[test]
fn gpu_pinned_host_sensitive_blocks_are_zeroed_before_reuse() {
    use hemem_memory::{PinnedHostResource, StatisticsAdaptor};
    let Some(device) = gpu_or_skip("gpu_pinned_host_sensitive_blocks_are_zeroed_before_reuse")
    else {
        return;
    };
    let pinned = PinnedHostResource::new(&device, 4 * MIB as u64).expect("pinned arena");
    let chain = StatisticsAdaptor::new(pinned);
    let statistics = chain.handle();
    let allocator = Allocator::from_parts(std::sync::Arc::new(chain), statistics);
    // Control: a non-sensitive block comes back with its words (the test
    // sees reuse); a sensitive one, dropped or released, with none of them.
    for (seed, sensitive, release) in [(1u64, false, false), (2, true, false), (3, true, true)] {
        let mut a = if sensitive {
            allocator.allocate_sensitive(MemoryClass::EvaluationKey, MIB)
        } else {
            allocator.allocate(MemoryClass::EvaluationKey, MIB)
        }
        .expect("alloc");
        assert_eq!(a.placement(), Placement::PinnedHost);
        let pattern = random_words(0x091e_d000 + seed, a.words());
        let words = a.host_words_mut().expect("pinned memory is host memory");
        words.copy_from_slice(&pattern);
        let addr = words.as_ptr() as usize;
        if release {
            allocator.release(a).expect("release");
        } else {
            drop(a);
        }
        let b = allocator
            .allocate(MemoryClass::EvaluationKey, MIB)
            .expect("alloc");
        let back = b.host_words().expect("host");
        assert_eq!(
            back.as_ptr() as usize,
            addr,
            "first fit hands out the same block"
        );
        let secret_words = count_secret_words(back, &pattern);
        if sensitive {
            assert_eq!(secret_words, 0, "sensitive block reused with its words");
        } else {
            assert_eq!(secret_words, pattern.len(), "control: words survive");
        }
    }
    assert_eq!(allocator.check(), Ok(()));
}
