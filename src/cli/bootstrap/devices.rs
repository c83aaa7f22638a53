//! `hemem bootstrap --devices 0,1,… --batch B`: one batch spread over
//! several devices by a [`MultiBootstrapper`], with the throughput
//! (bootstraps per second) and each device's peak memory.

use std::time::Instant;

use hemem::bench::measure::{peak_rss_bytes, peaks};
use hemem_bootstrap::Bootstrapper;
use hemem_bootstrap::multi_device::{MultiBootstrapper, Split};
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::Sampler;
use serde::Serialize;

use super::super::progress::Status;
use super::super::report::{human_bytes, precision_bits};
use super::Args;
use super::setup::{self, HeldKeys};

/// One device's part of the run.
#[derive(Debug, Serialize)]
struct DeviceReport {
    /// Position in `--devices`.
    index: usize,
    device: String,
    /// Inputs this device bootstrapped over all iterations.
    bootstrapped: u64,
    /// The most ciphertexts its bootstrapper ran together after its budget
    /// refused larger batches; absent when its whole share fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    sub_batch: Option<usize>,
    /// What `--diagonals fit` chose on this device's budget (`compact`,
    /// `mixed` or `encoded`), and the keys whose halves it stored.
    diagonal_storage: &'static str,
    keys_expanded: usize,
    peak_bytes_by_class: serde_json::Map<String, serde_json::Value>,
    /// GPU: the most device-resident bytes its residency manager saw, and
    /// its budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_device_resident_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    device_budget_bytes: Option<u64>,
    /// GPU: the most bytes its pool held at once, by the driver's count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pool_peak_bytes: Option<u64>,
}

#[derive(Debug, Serialize)]
struct Report {
    preset: String,
    /// The devices in `--devices` order; the first also holds the inputs
    /// and outputs (the keys were made or loaded there).
    devices: Vec<String>,
    memory_policy: String,
    /// `even` or `stealing:N` (`--chunk N`).
    split: String,
    slots: usize,
    /// The DFTs' BSGS ratio (log2).
    log_bsgs_ratio: i32,
    complex: bool,
    iterations: usize,
    batch: usize,
    /// Generating the keys on the first device (without `--keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    key_setup_ms: Option<f64>,
    /// Loading the key files on the first device (with `--keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    key_load_ms: Option<f64>,
    /// Handing the keys to every device (serialized once, loaded on each)
    /// and encoding each device's DFT diagonals, all devices at once.
    group_setup_ms: f64,
    /// Wall time of each batch, moves to and from the devices included.
    batch_ms: Vec<f64>,
    median_batch_ms: f64,
    /// `batch` over the median batch's seconds.
    bootstraps_per_second: f64,
    /// Over every output of the last batch.
    max_abs_error: f64,
    precision_bits: f64,
    output_level: usize,
    hoisting: &'static str,
    /// As asked (`fit` by default); each device's choice is in `per_device`.
    diagonal_storage: &'static str,
    per_device: Vec<DeviceReport>,
    /// The process's peak resident set (Linux `VmHWM`), host memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_rss_bytes: Option<u64>,
}

/// Runs `hemem bootstrap` over `devices`.
pub fn run(args: &Args, devices: &[DeviceSelection]) -> anyhow::Result<()> {
    if args.chain {
        anyhow::bail!("--devices and --chain cannot be combined");
    }
    if args.cupti || args.expand_keys {
        anyhow::bail!("--cupti and --expand-keys are not supported with --devices");
    }
    let (preset, params) = super::super::preset_parameters(&args.preset)?;
    let memory = args.memory.config()?;
    let options = setup::options(args)?;
    if memory.record_trace.is_some() {
        anyhow::bail!(
            "--record-trace records one device's allocations: run without --devices to record one"
        );
    }
    let contexts = devices
        .iter()
        .map(|&d| Context::with_memory(params.clone(), d, &memory))
        .collect::<Result<Vec<_>, _>>()?;
    let home = contexts
        .first()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("--devices names no device"))?;
    let names: Vec<String> = contexts.iter().map(|c| c.device().to_string()).collect();
    let split = match args.chunk {
        Some(chunk) => Split::Stealing { chunk },
        None => Split::Even,
    };
    let split_name = match split {
        Split::Stealing { chunk } => format!("stealing:{chunk}"),
        _ => "even".to_owned(),
    };
    let progress = Status::new(args.json);
    progress.say(&format!(
        "hemem bootstrap: {preset} on {} ({split_name}), policy {}",
        names.join(", "),
        memory.policy.kind().name()
    ));

    // New keys: the BSGS ratio every device's memory holds them for.
    let schedule = setup::schedule_for_keys(args, &contexts, &options)?;
    let HeldKeys {
        secret,
        public,
        keys,
        loaded,
        generated_ms: key_setup_ms,
    } = HeldKeys::obtain(args, &home, &schedule, progress)?;
    let schedule = match loaded {
        Some(_) => {
            setup::schedule_for_loaded_keys(args, &contexts, &keys, schedule, &options, progress)?
        }
        None => schedule,
    };
    progress.say(&format!(
        "  {} keys ({}) on {}; handing them to {} device(s)",
        keys.len(),
        human_bytes(keys.size_bytes() as u64),
        home.device(),
        contexts.len()
    ));
    let storage = options.storage;
    let group_started = Instant::now();
    let group =
        MultiBootstrapper::new(contexts.clone(), schedule, keys, options)?.with_split(split)?;
    let enc = params.enc_level();
    group.prepare_for_scale(params.default_scale(enc)?)?;
    for c in &contexts {
        c.synchronize()?;
    }
    let group_setup_ms = group_started.elapsed().as_secs_f64() * 1e3;
    progress.say(&format!(
        "  group set up in {:.1} s (keys loaded, diagonals encoded on every device)",
        group_setup_ms / 1e3
    ));

    // B different random inputs, encrypted on the first device at the
    // encryption level and levelled down to 3 (that level's default scale).
    let slots = group.schedule().slots();
    let batch = args.batch;
    let mut sampler = Sampler::from_os()?;
    let encoder = Encoder::new(&home);
    let encryptor = Encryptor::new(&home)?;
    let evaluator = Evaluator::new(&home);
    let mut values = Vec::with_capacity(batch);
    let mut inputs = Vec::with_capacity(batch);
    for _ in 0..batch {
        let v = setup::random_values(&mut sampler, slots, args.complex);
        let pt = encoder.encode_at(&v, enc, params.default_scale(enc)?, slots)?;
        let ct = encryptor.encrypt(&pt, &public)?;
        inputs.push(evaluator.level_down(&ct, Level(3))?);
        values.push(v);
    }

    let mut batch_ms = Vec::with_capacity(args.iterations);
    let mut outputs = Vec::new();
    for i in 0..args.iterations {
        let t = Instant::now();
        outputs = if args.complex {
            group.bootstrap_many(&inputs)?
        } else {
            group.bootstrap_real_many(&inputs)?
        };
        for c in &contexts {
            c.synchronize()?;
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        progress.say(&format!(
            "  batch {i}: {batch} bootstraps in {ms:.1} ms ({:.2} per second)",
            batch as f64 / (ms / 1e3)
        ));
        batch_ms.push(ms);
    }
    let decryptor = Decryptor::new(&home);
    let mut err = 0.0f64;
    for (out, want) in outputs.iter().zip(&values) {
        let got = encoder.decode(&decryptor.decrypt(out, &secret)?)?;
        err = err.max(setup::slot_error(&got, want, args.complex));
    }
    let output_level = outputs
        .first()
        .map(|o| o.level().get())
        .ok_or_else(|| anyhow::anyhow!("an empty batch came back"))?;
    let median_batch_ms = setup::median(&batch_ms);
    let counts = group.bootstrapped_counts();
    let mut per_device = Vec::with_capacity(contexts.len());
    for (index, context) in contexts.iter().enumerate() {
        let gpu = matches!(context.device(), Device::Gpu(_));
        let (peak_bytes_by_class, _) = peaks(&context.memory_statistics(), gpu);
        let usage = context.backend().allocator().residency_usage();
        let bootstrapper = group.bootstrapper(index);
        let limit = bootstrapper.map_or(usize::MAX, Bootstrapper::batch_limit);
        per_device.push(DeviceReport {
            index,
            device: context.device().to_string(),
            bootstrapped: counts.get(index).copied().unwrap_or(0),
            sub_batch: Some(limit).filter(|&n| n < batch),
            diagonal_storage: bootstrapper.map_or(storage.name(), |b| b.storage().name()),
            keys_expanded: bootstrapper.map_or(0, Bootstrapper::expanded_keys),
            peak_bytes_by_class,
            peak_device_resident_bytes: usage.map(|u| u.peak_device),
            device_budget_bytes: usage.map(|u| u.budget),
            pool_peak_bytes: context.backend().allocator().pool_reserved_peak_bytes()?,
        });
    }
    let report = Report {
        preset: preset.name().into(),
        devices: names,
        memory_policy: memory.policy.kind().name().into(),
        split: split_name,
        slots,
        log_bsgs_ratio: group.schedule().log_bsgs_ratio,
        complex: args.complex,
        iterations: batch_ms.len(),
        batch,
        key_setup_ms,
        key_load_ms: loaded.map(|(ms, _)| ms),
        group_setup_ms,
        median_batch_ms,
        bootstraps_per_second: batch as f64 / (median_batch_ms / 1e3),
        batch_ms,
        max_abs_error: err,
        precision_bits: precision_bits(err),
        output_level,
        hoisting: group
            .bootstrapper(0)
            .map_or("auto", |b| b.hoisting().name()),
        diagonal_storage: storage.name(),
        per_device,
        peak_rss_bytes: peak_rss_bytes(),
    };
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!(
            "{} bootstrap of {} {} slots, batch {} over {} device(s) ({}): median {:.1} ms per batch, {:.2} bootstraps per second, {:.2} bits (max error {:.3e}), output level {}",
            report.preset,
            slots,
            if args.complex { "complex" } else { "real" },
            batch,
            report.devices.len(),
            report.split,
            report.median_batch_ms,
            report.bootstraps_per_second,
            report.precision_bits,
            report.max_abs_error,
            report.output_level
        );
        for d in &report.per_device {
            let total: u64 = d
                .peak_bytes_by_class
                .values()
                .filter_map(serde_json::Value::as_u64)
                .sum();
            let device_peak = match (d.peak_device_resident_bytes, d.device_budget_bytes) {
                (Some(peak), Some(budget)) => format!(
                    ", peak device-resident {} (budget {})",
                    human_bytes(peak),
                    human_bytes(budget)
                ),
                _ => String::new(),
            };
            out!(
                "  device {} ({}): {} bootstrap{}, peak by class summed {}{device_peak}",
                d.index,
                d.device,
                d.bootstrapped,
                if d.bootstrapped == 1 { "" } else { "s" },
                human_bytes(total)
            );
        }
        if let Some(rss) = report.peak_rss_bytes {
            out!("peak resident set (host): {}", human_bytes(rss));
        }
    }
    Ok(())
}
