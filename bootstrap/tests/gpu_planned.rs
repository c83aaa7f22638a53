//! The `planned` memory policy on the GPU: bootstrapping under budgets that
//! force keys and diagonals to stream gives bit-identical ciphertexts to the
//! `device` policy (placement never changes arithmetic), one at a time and
//! in batches; the device footprint stays under the budget by hemem's count
//! and by the driver's; a budget below one operation's need is a typed
//! `OverBudget` error. The forms the bootstrapper keeps its data in
//! (`DiagonalStorage::Fit` resolving to encoded diagonals and stored key
//! halves where the budget has room, compact data where it has not) give
//! the same bit-identical ciphertexts. Tests named `gpu_*` skip (saying so) without a GPU,
//! and fail instead with `HEMEM_REQUIRE_GPU=1`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use hemem_bootstrap::linear_transform::DiagonalStorage;
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, BootstrapOptions, Bootstrapper};
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{seed32, seeded_rng, unit_disk};
use hemem_memory::testing::gpu_or_skip;
use hemem_memory::{BudgetSetting, MemoryConfig, PolicyConfig, ResidencyUsage, ZeroCopy};

type Words = Vec<(Vec<u64>, Vec<u64>)>;

struct Run {
    /// Every output of every round, in order.
    outputs: Words,
    usage: ResidencyUsage,
    pool_peak: u64,
    /// What the bootstrapper's storage resolved to, and the keys whose
    /// halves it stored.
    storage: DiagonalStorage,
    expanded_keys: usize,
}

const PRESET: Preset = Preset::TestFGb;
const SLOTS: usize = 1 << 4;

/// Under a sanitizer (`HEMEM_TEST_LIGHT=1`): two rounds instead of three.
fn light() -> bool {
    std::env::var("HEMEM_TEST_LIGHT").is_ok_and(|v| v == "1")
}

fn config(policy: PolicyConfig, budget: Option<u64>) -> MemoryConfig {
    MemoryConfig {
        policy,
        budget: budget.map_or(BudgetSetting::Auto, BudgetSetting::Bytes),
        ..MemoryConfig::default()
    }
}

/// Keys, inputs and three rounds of bootstrapping (one ciphertext alone,
/// then a batch of three) under `config`, the diagonals kept compact
/// (and the keys seeded) so that what streams does not depend on the
/// budget.
fn run(config: &MemoryConfig) -> hemem_bootstrap::Result<Run> {
    run_with(config, DiagonalStorage::Compact)
}

/// As [`run`], with the diagonals kept as `storage` says.
fn run_with(config: &MemoryConfig, storage: DiagonalStorage) -> hemem_bootstrap::Result<Run> {
    let params = Parameters::from_preset_with(PRESET, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::with_memory(params.clone(), DeviceSelection::Gpu(0), config)?;
    let keygen = KeyGenerator::with_seed(&context, seed32(11));
    let secret = keygen.secret_key()?;
    let public = keygen.public_key(&secret)?;
    let schedule = BootstrapSchedule::recommended_for_slots(&params, SLOTS)?;
    let keys = BootstrapKeys::generate(&keygen, &secret, &schedule)?;
    let options = BootstrapOptions {
        storage,
        ..BootstrapOptions::default()
    };
    let bootstrapper = Bootstrapper::with_options(&context, schedule, keys, options)?;
    let encoder = Encoder::new(&context);
    let cts = (0..3u64)
        .map(|i| {
            let mut rng = seeded_rng(40 + i);
            let values = unit_disk(&mut rng, SLOTS);
            let level = Level(3);
            let pt = encoder.encode_at(&values, level, params.default_scale(level)?, SLOTS)?;
            Encryptor::with_seed(&context, seed32(50 + i)).encrypt(&pt, &public)
        })
        .collect::<hemem_ckks::Result<Vec<_>>>()?;
    let words = |ct: &Ciphertext| -> hemem_ckks::Result<(Vec<u64>, Vec<u64>)> {
        Ok((ct.parts().0.to_words()?, ct.parts().1.to_words()?))
    };
    let mut outputs = Vec::new();
    let rounds = if light() { 2 } else { 3 };
    for _ in 0..rounds {
        outputs.push(words(&bootstrapper.bootstrap(&cts[0])?)?);
        for out in bootstrapper.bootstrap_many(&cts)? {
            outputs.push(words(&out)?);
        }
    }
    let allocator = context.backend().allocator();
    Ok(Run {
        storage: bootstrapper.storage(),
        expanded_keys: bootstrapper.expanded_keys(),
        outputs,
        usage: allocator.residency_usage().unwrap(),
        pool_peak: allocator
            .pool_reserved_peak_bytes()
            .map_err(hemem_ckks::Error::from)?
            .unwrap(),
    })
}

#[test]
fn gpu_planned_bootstraps_bit_identically_under_budgets() {
    let Some(device) = gpu_or_skip("gpu_planned_bootstraps_bit_identically_under_budgets") else {
        return;
    };
    drop(device);
    let reference = run(&config(PolicyConfig::Device, None)).unwrap();
    // Three rounds of the same inputs give the same outputs.
    assert!(reference.outputs[..4] == reference.outputs[4..8]);
    let ample = run(&config(PolicyConfig::Planned, None)).unwrap();
    assert!(ample.outputs == reference.outputs, "planned, no budget");
    // With the whole GPU's room, `Fit` keeps everything in full: encoded
    // diagonals, every key's halves stored — and the same words.
    let full = run_with(&config(PolicyConfig::Device, None), DiagonalStorage::Fit).unwrap();
    println!(
        "fit, no budget: {:?}, {} keys expanded",
        full.storage, full.expanded_keys
    );
    assert_eq!(full.storage, DiagonalStorage::Encoded);
    assert!(full.expanded_keys > 0, "no key halves stored");
    assert!(
        full.outputs == reference.outputs,
        "fit (full forms) differs"
    );
    // Under the `device` policy (nothing streams) and a budget between the
    // compact and the full footprints, `fit` keeps part in full and the
    // run stays under the budget with the same words.
    let (low, high) = (reference.usage.peak_device, full.usage.peak_device);
    assert!(low < high, "{low} {high}");
    let between = (high - (high - low) / 3).next_multiple_of(2 << 20);
    let part = run_with(
        &config(PolicyConfig::Device, Some(between)),
        DiagonalStorage::Fit,
    )
    .unwrap_or_else(|e| panic!("fit, device policy, budget {between}: {e}"));
    println!(
        "fit, device policy, budget {between} (compact {low}, full {high}): {:?}, {} keys expanded, peak {}",
        part.storage, part.expanded_keys, part.usage.peak_device
    );
    assert!(
        part.storage != DiagonalStorage::Compact || part.expanded_keys > 0,
        "nothing kept in full"
    );
    assert!(part.usage.peak_device <= between, "{:?}", part.usage);
    assert!(
        part.outputs == reference.outputs,
        "fit, part in full, differs"
    );
    let (others, streamed) = (ample.usage.others_peak, ample.usage.streamed_allocated);
    println!(
        "device peak {}, planned: others {others}, streamed {streamed}",
        reference.usage.peak_device
    );
    assert!(streamed > 0, "nothing was streamed");
    // Half the keys and diagonals streaming: the pool is held to whole
    // 32 MiB chunks, so the budget is one.
    let budget = (others + streamed / 2).next_multiple_of(32 << 20);
    assert!(budget < others + streamed, "{budget}: nothing would stream");
    let tight = run(&config(PolicyConfig::Planned, Some(budget)))
        .unwrap_or_else(|e| panic!("budget {budget}: {e}"));
    println!(
        "budget {budget}: {:?}, pool peak {}",
        tight.usage, tight.pool_peak
    );
    assert!(
        tight.outputs == reference.outputs,
        "planned under {budget} bytes differs from device"
    );
    assert_eq!(tight.usage.budget, budget);
    assert!(tight.usage.peak_device <= budget, "{:?}", tight.usage);
    assert!(
        tight.pool_peak <= budget,
        "driver's pool peak {}",
        tight.pool_peak
    );
    assert!(tight.usage.prefetched > 0, "nothing fetched ahead");
    // `Fit` under the same budget keeps what the room allows beside one
    // bootstrap's working memory, stays under the budget, and gives the
    // same words.
    let fitted = run_with(
        &config(PolicyConfig::Planned, Some(budget)),
        DiagonalStorage::Fit,
    )
    .unwrap_or_else(|e| panic!("fit, budget {budget}: {e}"));
    println!(
        "fit, budget {budget}: {:?}, {} keys expanded, {:?}",
        fitted.storage, fitted.expanded_keys, fitted.usage
    );
    assert!(
        fitted.outputs == reference.outputs,
        "fit under {budget} differs"
    );
    assert!(fitted.usage.peak_device <= budget, "{:?}", fitted.usage);
    assert!(
        fitted.pool_peak <= budget,
        "driver's pool peak {}",
        fitted.pool_peak
    );
    // The same budget with every streaming key and diagonal read in place
    // from pinned host memory (zero-copy): kernels read the same words.
    let in_place = run(&MemoryConfig {
        zero_copy: ZeroCopy::Streaming,
        ..config(PolicyConfig::Planned, Some(budget))
    })
    .unwrap_or_else(|e| panic!("zero-copy, budget {budget}: {e}"));
    println!("zero-copy, budget {budget}: {:?}", in_place.usage);
    assert!(
        in_place.outputs == reference.outputs,
        "planned with zero-copy reads differs from device"
    );
    assert!(in_place.usage.zero_copy_uses > 0, "{:?}", in_place.usage);
    assert!(in_place.usage.peak_device <= budget, "{:?}", in_place.usage);
    // Below what one operation needs: a typed error naming the budget.
    // (A whole number of 2 MiB, as the pool holds a budget this small.)
    let budget = (others / 3) & !((2 << 20) - 1);
    match run(&config(PolicyConfig::Planned, Some(budget))) {
        Err(hemem_bootstrap::Error::Ckks(hemem_ckks::Error::Memory(
            hemem_memory::Error::OverBudget {
                budget: b, in_use, ..
            },
        ))) => {
            assert_eq!(b, budget);
            println!("over budget as expected: {in_use}");
        }
        Err(e) => panic!("expected OverBudget, got {e:?}"),
        Ok(_) => panic!("bootstrapped under {budget} bytes"),
    }
}
