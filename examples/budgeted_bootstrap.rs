//! Bootstrapping under a device budget: a context whose memory system has
//! the `planned` policy and a 2 GiB budget (a smaller card, emulated),
//! on the GPU when one is usable and on the CPU otherwise. It bootstraps a
//! random real vector a few times, checks each result against f64, and
//! reports the device it used, the time per bootstrap and the memory it
//! moved.
//!
//! ```sh
//! cargo run --release --example budgeted_bootstrap                   # test-FGb, GPU if present (insecure, seconds)
//! cargo run --release --example budgeted_bootstrap -- --preset FGb --budget 2GiB --policy planned
//! ```
//!
//! Under `planned`, keys and DFT diagonals keep a pinned host master copy
//! and are streamed into pooled device slots ahead of use; the first
//! bootstrap records their order, later ones follow it. The budget is a
//! GPU setting: on the CPU it is accepted and has nothing to cap.
//! `tests/examples.rs` runs [`run`] on a test preset.

use std::error::Error;
use std::time::Instant;

use clap::Parser;
use hemem::memory::{BudgetSetting, ByteSize, Placement, PolicyConfig, PolicyKind};
use hemem::prelude::*;
use num_complex::Complex64;
use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};

/// Bootstrap under a device budget, on the GPU when present.
#[derive(Debug, Parser)]
struct Args {
    /// Parameter preset (test-* presets are insecure, for trying it out).
    #[arg(long, default_value = "test-FGb")]
    preset: Preset,
    /// auto (the GPU when usable, else the CPU), cpu, gpu or gpu:N.
    #[arg(long, default_value = "auto")]
    device: DeviceSelection,
    /// Device budget (2GiB, 4GiB, …): emulates a smaller card.
    #[arg(long, default_value = "2GiB")]
    budget: ByteSize,
    /// Memory policy: planned, device, managed, static or dynamic.
    #[arg(long, default_value = "planned")]
    policy: PolicyKind,
    /// Bootstraps to run (the first records the order of keys for `planned`).
    #[arg(long, default_value_t = 3)]
    iterations: usize,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// What [`run`] measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// The device the context chose.
    pub device: Device,
    /// Milliseconds of each bootstrap.
    pub bootstrap_ms: Vec<f64>,
    /// The largest slot error of any bootstrap against f64.
    pub max_error: f64,
    /// The level the bootstraps landed on.
    pub level: Level,
    /// Peak bytes the context's memory system held at once (every class
    /// and placement).
    pub peak_bytes: u64,
    /// Bytes of keys and diagonals streamed to the device (0 on the CPU).
    pub streamed_bytes: u64,
}

/// Bootstraps random real vectors `iterations` times on `device` under
/// `budget` bytes and `policy`, and checks each result against f64.
///
/// # Errors
/// Parameter, memory-configuration, key and bootstrapping errors; on the
/// GPU an `OverBudget` error if the budget cannot hold one operation.
pub fn run(
    preset: Preset,
    device: DeviceSelection,
    budget: u64,
    policy: PolicyKind,
    iterations: usize,
    seed: u64,
) -> Result<Report, Box<dyn Error>> {
    let check = if preset.is_test() {
        SecurityCheck::AllowInsecure
    } else {
        SecurityCheck::Enforce
    };
    let params = Parameters::from_preset_with(preset, check)?;
    // The memory system: its policy and budget, nothing from the
    // environment (`MemoryConfig::from_env()` would read HEMEM_*).
    let memory = MemoryConfig {
        policy: PolicyConfig::from_kind(policy, None)?,
        budget: BudgetSetting::Bytes(budget),
        ..MemoryConfig::default()
    };
    let context = Context::with_memory(params.clone(), device, &memory)?;

    let keygen = KeyGenerator::new(&context)?;
    let secret = keygen.secret_key()?;
    let public = keygen.public_key(&secret)?;
    let schedule = BootstrapSchedule::recommended(&params)?;
    let keys = BootstrapKeys::generate(&keygen, &secret, &schedule)?;
    let bootstrapper = Bootstrapper::new(&context, schedule, keys)?;
    let encoder = Encoder::new(&context);
    let encryptor = Encryptor::new(&context)?;
    let decryptor = Decryptor::new(&context);
    let evaluator = Evaluator::new(&context);

    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut bootstrap_ms = Vec::with_capacity(iterations);
    let mut max_error = 0.0f64;
    let mut level = Level(0);
    for _ in 0..iterations {
        let values: Vec<Complex64> = (0..params.slots())
            .map(|_| {
                let unit = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                Complex64::new(2.0 * unit - 1.0, 0.0)
            })
            .collect();
        let ct = encryptor.encrypt(&encoder.encode(&values)?, &public)?;
        // Bootstrapping takes a ciphertext at level 3 or above.
        let ct = evaluator.level_down(&ct, Level(3))?;
        context.synchronize()?;
        let started = Instant::now();
        let fresh = bootstrapper.bootstrap_real(&ct)?;
        context.synchronize()?;
        bootstrap_ms.push(started.elapsed().as_secs_f64() * 1e3);
        level = fresh.level();
        let got = encoder.decode(&decryptor.decrypt(&fresh, &secret)?)?;
        let error = got
            .iter()
            .zip(&values)
            .map(|(a, b)| (a.re - b.re).abs())
            .fold(0.0, f64::max);
        max_error = max_error.max(error);
    }
    let statistics = context.memory_statistics();
    Ok(Report {
        device: context.device(),
        bootstrap_ms,
        max_error,
        level,
        peak_bytes: statistics.total().bytes.peak,
        streamed_bytes: statistics
            .placement(Placement::Streamed)
            .prefetched_to_device,
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let report = run(
        args.preset,
        args.device,
        args.budget.0,
        args.policy,
        args.iterations,
        args.seed,
    )?;
    let budget = match report.device {
        Device::Cpu => "not enforced on the CPU".to_owned(),
        Device::Gpu(_) => format!("enforced on the device: {}", args.budget),
    };
    println!(
        "{} on {} (policy {}, budget {budget})",
        args.preset,
        report.device,
        args.policy.name()
    );
    let times: Vec<String> = report
        .bootstrap_ms
        .iter()
        .map(|ms| format!("{ms:.1}"))
        .collect();
    println!(
        "bootstraps to level {}: {} ms; max error {:.2e} ({:.1} bits)",
        report.level.get(),
        times.join(", "),
        report.max_error,
        -report.max_error.log2()
    );
    println!(
        "peak memory {}, streamed to the device {}",
        ByteSize(report.peak_bytes),
        ByteSize(report.streamed_bytes)
    );
    Ok(())
}
