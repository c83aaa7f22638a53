//! `hemem bootstrap`: K bootstraps on a preset, with time per bootstrap,
//! precision, key-set and constant sizes, and peak memory per class.

use std::time::Instant;

use hemem_bootstrap::schedule::{BootstrapSchedule, recommended_choice};
use hemem_bootstrap::{BootstrapKeys, Bootstrapper};
use hemem_ckks::backend::DeviceSelection;
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::Sampler;
use hemem_memory::{MemoryClass, Placement, Statistics};
use num_complex::Complex64;
use serde::Serialize;

use super::memory::MemoryArgs;
use super::report::{human_bytes, max_abs_error, precision_bits};

/// Arguments of `hemem bootstrap`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Parameter preset (bootstrappable: FGa, FGb, FVa, FVb, FVc, FTa, FTb, test-*).
    #[arg(long, default_value = "FGb")]
    preset: String,
    /// cpu, gpu (GPU 0, or --gpu N), gpu:N or auto.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// The GPU to use with --device gpu.
    #[arg(long, value_name = "N")]
    gpu: Option<usize>,
    /// Bootstraps to run (timed one by one).
    #[arg(long, default_value_t = 3)]
    iterations: usize,
    /// Slot count (a power of two up to N/2; default: all).
    #[arg(long)]
    slots: Option<usize>,
    /// Bootstrap complex values (two EvalMods) instead of real ones.
    #[arg(long)]
    complex: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    memory: MemoryArgs,
}

#[derive(Debug, Serialize)]
struct Report {
    preset: String,
    device: String,
    memory_policy: String,
    slots: usize,
    complex: bool,
    iterations: usize,
    key_setup_ms: f64,
    bootstrap_ms: Vec<f64>,
    median_ms: f64,
    max_abs_error: f64,
    precision_bits: f64,
    output_level: usize,
    keys: usize,
    key_set_bytes: usize,
    constant_bytes: usize,
    sse: bool,
    peak_bytes_by_class: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_device_bytes_by_class: Option<serde_json::Map<String, serde_json::Value>>,
    /// The residency manager's eviction order (GPU runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    eviction: Option<String>,
    /// Managed bytes prefetched back to the device during each bootstrap
    /// (buffers that had been evicted; 0 under `managed`, whose pages fault
    /// in instead).
    to_device_bytes: Vec<u64>,
    /// Managed bytes evicted to the host during each bootstrap.
    evicted_bytes: Vec<u64>,
}

/// Peak bytes per class; and on a GPU, pooled plus managed peaks per class.
pub fn peaks(
    statistics: &Statistics,
    device: bool,
) -> (
    serde_json::Map<String, serde_json::Value>,
    Option<serde_json::Map<String, serde_json::Value>>,
) {
    let all = statistics
        .peak_bytes_by_class()
        .into_iter()
        .map(|(c, b)| (c.name().to_owned(), serde_json::Value::from(b)))
        .collect();
    let device = device.then(|| {
        MemoryClass::ALL
            .into_iter()
            .map(|c| {
                let b = statistics.get(c, Placement::DevicePool).bytes.peak
                    + statistics.get(c, Placement::Managed).bytes.peak;
                (c.name().to_owned(), serde_json::Value::from(b))
            })
            .collect()
    });
    (all, device)
}

/// Runs the command.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let preset: Preset = args.preset.parse()?;
    let check = if preset.is_test() {
        SecurityCheck::AllowInsecure
    } else {
        SecurityCheck::Enforce
    };
    let params = Parameters::from_preset_with(preset, check)?;
    let selection: DeviceSelection = match (args.device.as_str(), args.gpu) {
        ("gpu", Some(ordinal)) => DeviceSelection::Gpu(ordinal),
        (name, _) => name.parse()?,
    };
    let memory = args.memory.config()?;
    let context = Context::with_memory(params.clone(), selection, &memory)?;
    let progress = |msg: &str| {
        if !args.json {
            eprintln!("{msg}");
        }
    };
    progress(&format!(
        "hemem bootstrap: {preset} on {}, policy {}",
        context.device(),
        memory.policy.kind().name()
    ));

    let started = Instant::now();
    let keygen = KeyGenerator::new(&context)?;
    let secret = keygen.secret_key()?;
    let public = keygen.public_key(&secret)?;
    let schedule =
        BootstrapSchedule::new(&params, recommended_choice(preset.shape_of()), args.slots)?;
    let sse = schedule.choice.sse;
    let keys = BootstrapKeys::generate(&keygen, &secret, &schedule)?;
    let (key_count, key_bytes) = (keys.len(), keys.size_bytes());
    progress(&format!(
        "  {key_count} keys ({}) generated",
        human_bytes(key_bytes as u64)
    ));
    let bootstrapper = Bootstrapper::new(&context, schedule, keys)?;
    // The input is encrypted at the encryption level and levelled down, so
    // it keeps that level's default scale: SlotToCoeff is encoded for it now.
    let enc = params.enc_level();
    bootstrapper.prepare_for_scale(params.default_scale(enc)?)?;
    context.backend().synchronize()?;
    let key_setup_ms = started.elapsed().as_secs_f64() * 1e3;
    progress(&format!(
        "  key setup {:.1} s (keys and encoded DFT diagonals)",
        key_setup_ms / 1e3
    ));

    let slots = bootstrapper.schedule().slots();
    let mut sampler = Sampler::from_os()?;
    let values: Vec<Complex64> = (0..slots)
        .map(|_| {
            if args.complex {
                let r = sampler.uniform_f64().sqrt();
                Complex64::from_polar(r, 2.0 * std::f64::consts::PI * sampler.uniform_f64())
            } else {
                Complex64::new(2.0 * sampler.uniform_f64() - 1.0, 0.0)
            }
        })
        .collect();
    let encoder = Encoder::new(&context);
    let pt = encoder.encode_at(&values, enc, params.default_scale(enc)?, slots)?;
    let ct = Encryptor::new(&context)?.encrypt(&pt, &public)?;
    let ct = Evaluator::new(&context).level_down(&ct, Level(3))?;

    let mut times = Vec::with_capacity(args.iterations.max(1));
    let (mut to_device_bytes, mut evicted_bytes) = (Vec::new(), Vec::new());
    let mut out = None;
    for i in 0..args.iterations.max(1) {
        let before = context.memory_statistics().total();
        let t = Instant::now();
        let result = if args.complex {
            bootstrapper.bootstrap(&ct)?
        } else {
            bootstrapper.bootstrap_real(&ct)?
        };
        context.backend().synchronize()?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let after = context.memory_statistics().total();
        let back = after.prefetched_to_device - before.prefetched_to_device;
        let evicted = after.prefetched_to_host - before.prefetched_to_host;
        progress(&format!(
            "  bootstrap {i}: {ms:.1} ms, {} back to the device, {} evicted",
            human_bytes(back),
            human_bytes(evicted)
        ));
        times.push(ms);
        to_device_bytes.push(back);
        evicted_bytes.push(evicted);
        out = Some(result);
    }
    let out = out.ok_or_else(|| anyhow::anyhow!("no bootstrap ran"))?;
    let got = encoder.decode(&Decryptor::new(&context).decrypt(&out, &secret)?)?;
    let err = if args.complex {
        max_abs_error(&got, &values)
    } else {
        got.iter()
            .zip(&values)
            .map(|(a, b)| (a.re - b.re).abs())
            .fold(0.0, f64::max)
    };
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median_ms = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    let (peak_bytes_by_class, peak_device_bytes_by_class) = peaks(
        &context.memory_statistics(),
        matches!(context.device(), Device::Gpu(_)),
    );
    let report = Report {
        preset: preset.name().into(),
        device: context.device().to_string(),
        memory_policy: memory.policy.kind().name().into(),
        slots,
        complex: args.complex,
        iterations: times.len(),
        key_setup_ms,
        bootstrap_ms: times,
        median_ms,
        max_abs_error: err,
        precision_bits: precision_bits(err),
        output_level: out.level().get(),
        keys: key_count,
        key_set_bytes: key_bytes,
        constant_bytes: bootstrapper.constant_bytes(),
        sse,
        peak_bytes_by_class,
        peak_device_bytes_by_class,
        eviction: context
            .backend()
            .allocator()
            .residency()
            .map(|r| r.eviction().name().to_owned()),
        to_device_bytes,
        evicted_bytes,
    };
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!(
            "{} bootstrap of {} {} slots on {}: median {:.1} ms over {} runs, {:.2} bits (max error {:.3e}), output level {}",
            report.preset,
            slots,
            if args.complex { "complex" } else { "real" },
            report.device,
            report.median_ms,
            report.iterations,
            report.precision_bits,
            report.max_abs_error,
            report.output_level
        );
        out!(
            "key setup {:.1} s; {} keys, {}; constants {}; SSE {}",
            report.key_setup_ms / 1e3,
            report.keys,
            human_bytes(report.key_set_bytes as u64),
            human_bytes(report.constant_bytes as u64),
            if sse { "yes" } else { "no" }
        );
        out!("peak memory by class:");
        for (class, bytes) in &report.peak_bytes_by_class {
            out!("  {class:<20} {}", human_bytes(bytes.as_u64().unwrap_or(0)));
        }
    }
    Ok(())
}
