//! `hemem demo`: encrypt random values, multiply, rotate, conjugate, add,
//! square down to the lowest user level, bootstrap (when the preset allows
//! it) and square again, and report every step's precision and time, plus
//! peak memory per class.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use hemem::bench::measure::peaks;
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, BootstrapOptions, Bootstrapper};
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::Sampler;
use num_complex::Complex64;
use serde::Serialize;

use super::device::DeviceArgs;
use super::keygen::BsgsRatio;
use super::memory::MemoryArgs;
use super::report::{human_bytes, max_abs_error, precision_bits, print_by_class};

/// The rotation the demo shows.
const ROTATION: i64 = 1;

/// Arguments of `hemem demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Parameter preset (FGa, FGb, FVa, FVb, FVc, FTa, FTb; test-* variants are insecure).
    #[arg(long, default_value = "FTb")]
    preset: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    device: DeviceArgs,
    /// Skip the bootstrap step (its keys take seconds to minutes and, on the
    /// real presets, gigabytes).
    #[arg(long)]
    no_bootstrap: bool,
    /// Load the secret, public and bootstrap keys from FILE.secret,
    /// FILE.public and FILE (written by `hemem keygen` for the same preset)
    /// instead of generating them.
    #[arg(long, value_name = "FILE")]
    keys: Option<std::path::PathBuf>,
    #[command(flatten)]
    memory: MemoryArgs,
}

#[derive(Debug, Serialize)]
struct Step {
    op: String,
    level: usize,
    max_abs_error: f64,
    precision_bits: f64,
    ms: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    preset: String,
    device: String,
    slots: usize,
    steps: Vec<Step>,
    peak_bytes_by_class: serde_json::Map<String, serde_json::Value>,
    /// GPU runs: per class, peak pooled plus peak managed bytes (an upper
    /// bound of the class's peak device footprint).
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_device_bytes_by_class: Option<serde_json::Map<String, serde_json::Value>>,
    memory_policy: String,
    trace_written: Option<String>,
    /// Where the `profiled` policy's replay first departed from its
    /// recording (with `--on-divergence static`; placement by class after).
    #[serde(skip_serializing_if = "Option::is_none")]
    policy_divergence: Option<String>,
    /// Loading the key files (with `--keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    key_load_ms: Option<f64>,
}

fn random_unit_disk(sampler: &mut Sampler, count: usize) -> Vec<Complex64> {
    (0..count)
        .map(|_| {
            let r = sampler.uniform_f64().sqrt();
            let t = 2.0 * std::f64::consts::PI * sampler.uniform_f64();
            Complex64::from_polar(r, t)
        })
        .collect()
}

/// Runs the demo.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let (preset, params) = super::preset_parameters(&args.preset)?;
    // The demo runs on the device `--device` selects. On the GPU the memory
    // policy places every buffer; on the CPU the policy is checked (a
    // profiled policy's trace is read and analysed) but only host memory is
    // placed, and a recorded trace holds the CPU backend's allocations.
    let memory = args.memory.config()?;
    let selection = args.device.selection()?;
    let context = Context::with_memory(params, selection, &memory)?;
    if context.device() == Device::Cpu
        && let Some(note) = args.memory.cpu_note()
    {
        eprintln!("{note}");
    }
    let allocator = context.backend().allocator().clone();
    let slots = context.params().slots();
    let progress = super::progress::Status::new(args.json);

    progress.say(&format!(
        "hemem demo: preset {preset}, {slots} slots, device {}",
        context.device()
    ));
    let started = Instant::now();
    let keygen = KeyGenerator::new(&context)?;
    let (secret, public, mut bootstrap_keys, key_load_ms) = match &args.keys {
        Some(path) => {
            let loaded = super::keygen::load(&context, path)?;
            // The demo bootstraps every slot: keys made for fewer
            // (`hemem keygen --slots`) lack rotations it needs.
            if !args.no_bootstrap && !loaded.keys.slot_counts(context.params()).contains(&slots) {
                anyhow::bail!(
                    "the keys in {} do not bootstrap the {slots} slots the demo uses (made with hemem keygen --slots, or for other levels): make them without --slots, or run with --no-bootstrap",
                    path.display()
                );
            }
            progress.say(&format!(
                "  keys loaded from {} in {:.1} ms",
                path.display(),
                loaded.ms
            ));
            (
                loaded.secret,
                loaded.public,
                Some(loaded.keys),
                Some(loaded.ms),
            )
        }
        None => {
            let secret = keygen.secret_key()?;
            let public = keygen.public_key(&secret)?;
            progress.say(&format!(
                "  keys generated in {:.1} ms",
                started.elapsed().as_secs_f64() * 1e3
            ));
            (secret, public, None, None)
        }
    };

    let encoder = Encoder::new(&context);
    let encryptor = Encryptor::new(&context)?;
    let decryptor = Decryptor::new(&context);
    let request = KeySetRequest {
        relinearization: true,
        conjugation: true,
        rotations: vec![ROTATION],
        ..Default::default()
    };
    let t = Instant::now();
    let keys = keygen.key_set(&secret, &request)?;
    progress.say(&format!(
        "  {} evaluation keys ({}) in {:.1} ms",
        keys.len(),
        human_bytes(keys.size_bytes() as u64),
        t.elapsed().as_secs_f64() * 1e3
    ));
    let evaluator = Evaluator::with_keys(&context, Arc::new(keys));
    let mut sampler = Sampler::from_os()?;
    let x = random_unit_disk(&mut sampler, slots);
    let y = random_unit_disk(&mut sampler, slots);

    let mut steps = Vec::new();
    let mut measure =
        |op: &str, ct: &Ciphertext, expected: &[Complex64], ms: f64| -> anyhow::Result<()> {
            let out = encoder.decode(&decryptor.decrypt(ct, &secret)?)?;
            let err = max_abs_error(&out, expected);
            steps.push(Step {
                op: op.to_owned(),
                level: ct.level().get(),
                max_abs_error: err,
                precision_bits: precision_bits(err),
                ms,
            });
            Ok(())
        };
    let timed =
        |f: &dyn Fn() -> hemem_ckks::Result<Ciphertext>| -> anyhow::Result<(Ciphertext, f64)> {
            let t = Instant::now();
            let ct = f()?;
            Ok((ct, t.elapsed().as_secs_f64() * 1e3))
        };

    let (cx, ms) = timed(&|| encryptor.encrypt(&encoder.encode(&x)?, &public))?;
    measure("encrypt", &cx, &x, ms).context("decrypting the fresh ciphertext")?;
    let cy = encryptor.encrypt(&encoder.encode(&y)?, &public)?;

    let (prod, ms) = timed(&|| evaluator.mult(&cx, &cy))?;
    let xy: Vec<Complex64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    measure("mult", &prod, &xy, ms)?;

    let (rot, ms) = timed(&|| evaluator.rotate(&cx, ROTATION))?;
    let rotated: Vec<Complex64> = x
        .iter()
        .cycle()
        .skip(ROTATION as usize)
        .take(slots)
        .copied()
        .collect();
    measure("rotate", &rot, &rotated, ms)?;

    let (conj, ms) = timed(&|| evaluator.conjugate(&cx))?;
    let conjugated: Vec<Complex64> = x.iter().map(|v| v.conj()).collect();
    measure("conjugate", &conj, &conjugated, ms)?;

    let (sum, ms) = timed(&|| evaluator.add(&cx, &cy))?;
    let expected: Vec<Complex64> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    measure("add", &sum, &expected, ms)?;

    // A chain of squarings down to the lowest user level (the values stay
    // in the unit disk, as bootstrapping needs).
    let floor = context.params().min_user_level();
    let mut ct = cx;
    let mut expected = x.clone();
    while ct.level() > floor {
        let (next, ms) = timed(&|| evaluator.square(&ct))?;
        expected = expected.iter().map(|v| v * v).collect();
        measure("square", &next, &expected, ms)?;
        ct = next;
    }

    // Bootstrap, then compute again.
    if context.params().post_bootstrap_level().is_some() && !args.no_bootstrap {
        let t = Instant::now();
        let recommended = BootstrapSchedule::recommended(context.params())?;
        // The BSGS ratio the loaded keys serve, or the one this device's
        // memory holds keys for (as `hemem bootstrap` and `keygen` choose).
        let (schedule, keys, made) = match bootstrap_keys.take() {
            Some(keys) => (
                BsgsRatio::Fit.for_loaded_keys(
                    &keys,
                    context.params(),
                    recommended,
                    args.keys
                        .as_deref()
                        .unwrap_or(std::path::Path::new("--keys")),
                )?,
                keys,
                "loaded",
            ),
            None => {
                let schedule = Bootstrapper::fit_schedule(&context, recommended)?;
                let keys = super::progress::with_bar("keys", args.json, |p| {
                    BootstrapKeys::generate_with_progress(&keygen, &secret, &schedule, p)
                })?;
                (schedule, keys, "generated")
            }
        };
        let count = keys.len();
        let bootstrapper = super::progress::with_bar("diagonals", args.json, |p| {
            Bootstrapper::with_progress(&context, schedule, keys, BootstrapOptions::default(), p)
        })?;
        bootstrapper.prepare_for_scale(ct.scale())?;
        progress.say(&format!(
            "  {count} bootstrapping keys ({made}) and DFT diagonals in {:.1} s",
            t.elapsed().as_secs_f64()
        ));
        let t = Instant::now();
        let refreshed = bootstrapper.bootstrap(&ct)?;
        context.synchronize()?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        measure("bootstrap", &refreshed, &expected, ms)?;
        let (next, ms) = timed(&|| evaluator.square(&refreshed))?;
        expected = expected.iter().map(|v| v * v).collect();
        measure("square", &next, &expected, ms)?;
    }

    let (peaks, device_peaks) = peaks(
        &context.memory_statistics(),
        matches!(context.device(), Device::Gpu(_)),
    );
    let trace_written = allocator
        .write_trace()?
        .map(|path| path.display().to_string());
    let report = Report {
        preset: preset.name().to_owned(),
        device: context.device().to_string(),
        slots,
        steps,
        peak_bytes_by_class: peaks,
        peak_device_bytes_by_class: device_peaks,
        memory_policy: memory.policy.kind().name().to_owned(),
        trace_written,
        policy_divergence: allocator.policy_divergence().map(|e| e.to_string()),
        key_load_ms,
    };
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!(
            "{:<10} {:>6} {:>14} {:>10} {:>10}",
            "step",
            "level",
            "max |error|",
            "bits",
            "ms"
        );
        for s in &report.steps {
            out!(
                "{:<10} {:>6} {:>14.3e} {:>10.2} {:>10.2}",
                s.op,
                s.level,
                s.max_abs_error,
                s.precision_bits,
                s.ms
            );
        }
        print_by_class("peak memory by class:", &report.peak_bytes_by_class)?;
        if let Some(device) = &report.peak_device_bytes_by_class {
            print_by_class("peak device bytes by class (pooled + managed):", device)?;
        }
        out!("memory policy: {}", report.memory_policy);
        if let Some(path) = &report.trace_written {
            out!("allocation trace written to {path}");
        }
        if let Some(divergence) = &report.policy_divergence {
            out!("the profiled replay left its recording ({divergence}); placed by class after");
        }
    }
    Ok(())
}
