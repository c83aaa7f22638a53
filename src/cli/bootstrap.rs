//! `hemem bootstrap`: K bootstraps on a preset, with time per bootstrap,
//! precision, key-set and constant sizes, and peak memory per class; with
//! `--chain`, K successive bootstraps of one ciphertext with a
//! multiplication between each; with `--devices`, one batch spread over
//! several devices ([`devices`]).

mod devices;
mod timeline;

use std::sync::Arc;
use std::time::Instant;

use hemem::bench::measure::{Snapshot, peak_rss_bytes, peaks, settle_copies};
use hemem_bootstrap::linear_transform::{DiagonalStorage, Hoisting};
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, BootstrapOptions, Bootstrapper};
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::{Sampler, SeedPrf};
use hemem_memory::MemoryClass;
use num_complex::Complex64;
use serde::Serialize;

use super::device::DeviceArgs;
use super::keygen::UniformPrf;
use super::memory::MemoryArgs;
use super::report::{human_bytes, max_abs_error, precision_bits, print_by_class};

/// Arguments of `hemem bootstrap`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Parameter preset (bootstrappable: FGa, FGb, FVa, FVb, FVc, FTa, FTb, test-*).
    #[arg(long, default_value = "FGb")]
    preset: String,
    #[command(flatten)]
    device: DeviceArgs,
    /// Bootstraps to run (timed one by one).
    #[arg(long, default_value_t = 3)]
    iterations: usize,
    /// Bootstrap B copies of the input at once, stage by stage
    /// (`Bootstrapper::bootstrap_many`): each key and diagonal serves the
    /// whole batch; times are per ciphertext, bytes moved per batch.
    #[arg(long, default_value_t = 1, value_name = "B")]
    batch: usize,
    /// Spread each batch of B different inputs over these devices (GPU
    /// ordinals, or cpu / gpu:N; the same GPU twice is two logical
    /// devices) with a `MultiBootstrapper`, one context and memory system
    /// each (the memory flags apply to every device); reports bootstraps
    /// per second and each device's peak. Absent: one device (--device).
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = super::device::parse_listed)]
    devices: Option<Vec<DeviceSelection>>,
    /// With --devices: work stealing in chunks of N inputs instead of even
    /// shares.
    #[arg(long, value_name = "N", requires = "devices")]
    chunk: Option<usize>,
    /// Slot count (a power of two up to N/2; default: all).
    #[arg(long)]
    slots: Option<usize>,
    /// Bootstrap complex values (two EvalMods) instead of real ones.
    #[arg(long)]
    complex: bool,
    /// Chain the bootstraps: each output is multiplied by a fresh
    /// encryption of random ±1 values, levelled down to 3 and bootstrapped
    /// again; each bootstrap's own error (against its decrypted input) and
    /// the end-to-end error are reported.
    #[arg(long)]
    chain: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Load the keys from FILE, FILE.public and FILE.secret (written by
    /// `hemem keygen` for the same preset and slots) instead of generating
    /// them; the report gives `key_load_ms` instead of `key_setup_ms`.
    #[arg(long, value_name = "FILE")]
    keys: Option<std::path::PathBuf>,
    /// How the DFT diagonals are kept: fit (the default: the fastest forms
    /// of the diagonals and keys the device budget holds beside one
    /// bootstrap's working memory; on the CPU, what half the available host
    /// memory holds), compact (rounded
    /// coefficients, expanded when used), encoded (every limb, NTT form),
    /// or mixed:SIZE (CoeffToSlot's diagonals encoded while they fit SIZE,
    /// the rest compact). Every form gives the same results.
    #[arg(long, default_value = "fit")]
    diagonals: String,
    /// How the DFTs' BSGS linear transforms are evaluated: double (baby
    /// and giant steps kept in the extended basis Q ∪ P, one ModDown pair
    /// per transform), single (one ModDown pair per rotation; the default,
    /// the same results under every budget) or auto (per transform,
    /// whichever runs fewer limb NTTs; ~1 % faster without a budget).
    #[arg(long, default_value = "single")]
    hoisting: String,
    /// With `--diagonals fit`: the working memory left free beside what is
    /// kept in full, in top-level ciphertexts (default: 32 under the
    /// `planned` policy, which streams what an estimate leaves short; 48
    /// under the others).
    #[arg(long, value_name = "CIPHERTEXTS")]
    fit_reserve: Option<u64>,
    /// With `--batch`: how many ciphertexts share each expansion of a
    /// compact diagonal (default 2; 1 expands for each ciphertext; more
    /// holds more baby-step rotations at once).
    #[arg(long, value_name = "N")]
    shared_expansions: Option<usize>,
    /// Keep the keys' uniform halves (twice the key bytes) instead of
    /// regenerating them from their seeds in every key switch.
    #[arg(long)]
    expand_keys: bool,
    /// The function that expands the generated keys' seeds: chacha12 (the
    /// default) or chacha20 (as earlier builds made them). Loaded keys keep
    /// their own.
    #[arg(long, value_enum, default_value_t = UniformPrf::Chacha12)]
    uniform_prf: UniformPrf,
    /// GPU runs: count each bootstrap's host↔device copies with CUPTI's
    /// copy records as well (an independent check of `to_device_bytes`).
    #[arg(long)]
    cupti: bool,
    /// With `--cupti`: record every kernel too, and report each bootstrap's
    /// device time split into kernels, waits during copies and other idle
    /// time, with the host's time in each driver call (`gpu_timeline`).
    /// The records slow the run a little.
    #[arg(long, requires = "cupti")]
    gpu_timeline: bool,
    /// `planned`: write the order the last phase was recorded in, its
    /// objects' sizes and the look-ahead's settings to FILE when the runs
    /// end (replayed on the CPU by the ignored test
    /// `replays_a_streaming_trace` of `hemem-memory`).
    #[arg(long, value_name = "FILE")]
    streaming_trace: Option<std::path::PathBuf>,
    #[command(flatten)]
    memory: MemoryArgs,
}

/// One bootstrap of a chain.
#[derive(Debug, Serialize)]
struct ChainStep {
    ms: f64,
    /// Precision of this bootstrap alone: its output against its decrypted input.
    bits: f64,
    /// Precision against the exact product of the inputs so far.
    end_to_end_bits: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    /// Where `--record-trace` wrote the run's allocation trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_written: Option<String>,
    /// Where the `profiled` policy's replay first departed from its
    /// recording (with `--on-divergence static`; placement by class after).
    #[serde(skip_serializing_if = "Option::is_none")]
    policy_divergence: Option<String>,
    preset: String,
    device: String,
    memory_policy: String,
    slots: usize,
    complex: bool,
    iterations: usize,
    /// Ciphertexts per bootstrap call (`--batch`); `bootstrap_ms` is per
    /// ciphertext.
    batch: usize,
    /// The most ciphertexts run together after the budget refused larger
    /// batches (`bootstrap_many` halves a refused batch); absent when the
    /// whole batch fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    sub_batch: Option<usize>,
    /// Generating the keys and encoding the DFT diagonals (without `--keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    key_setup_ms: Option<f64>,
    /// Loading the key files (with `--keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    key_load_ms: Option<f64>,
    /// Encoding the DFT diagonals after loading the keys (with `--keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    constant_setup_ms: Option<f64>,
    /// Bytes of the bootstrap key file (with `--keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    key_file_bytes: Option<u64>,
    bootstrap_ms: Vec<f64>,
    /// When each bootstrap's call returned on the host, before waiting for
    /// the device (ms per ciphertext): a figure close to `bootstrap_ms`
    /// says the host, not the device, set the pace.
    submit_ms: Vec<f64>,
    median_ms: f64,
    max_abs_error: f64,
    precision_bits: f64,
    output_level: usize,
    keys: usize,
    key_set_bytes: usize,
    /// Bytes of DFT diagonals held, as stored.
    constant_bytes: usize,
    /// The same diagonals' bytes if they were kept encoded.
    constant_encoded_bytes: usize,
    /// `compact`, `encoded` or `mixed` (what `fit` resolved to).
    diagonal_storage: &'static str,
    /// With `--batch`: how many ciphertexts share each expansion of a
    /// compact diagonal (1 when every diagonal is compact).
    shared_expansions: usize,
    /// Keys whose uniform halves `fit` stored (0 with any other
    /// `--diagonals`; `--expand-keys` stores every key's beforehand).
    keys_expanded: usize,
    /// The function that expanded the generated keys' seeds (`ChaCha12`,
    /// `ChaCha20`); none for keys loaded from a file.
    uniform_prf: Option<&'static str>,
    /// `single` or `double` hoisting in the linear transforms.
    hoisting: &'static str,
    sse: bool,
    peak_bytes_by_class: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_device_bytes_by_class: Option<serde_json::Map<String, serde_json::Value>>,
    /// GPU runs: the most device-resident bytes the residency manager saw
    /// (pool footprint plus resident managed bytes), against the budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_device_resident_bytes: Option<u64>,
    /// GPU runs: the same peak when key setup (keys, diagonals, tables)
    /// ended, before the first bootstrap.
    #[serde(skip_serializing_if = "Option::is_none")]
    setup_peak_device_resident_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    device_budget_bytes: Option<u64>,
    /// GPU runs: the most bytes the device pool held at once by the pool's
    /// own count (the physical pages the paged pool created; the driver's
    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH` for its pool); under `planned`,
    /// everything hemem holds on the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pool_peak_bytes: Option<u64>,
    /// `planned`: bytes of the streamed objects (keys and diagonals, held in
    /// pinned host memory), and of those fetched ahead of use in the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    streamed_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prefetched_bytes: Option<u64>,
    /// `planned`: the most pool bytes held at once by everything but the
    /// streamed objects (ciphertexts, temporaries, tables).
    #[serde(skip_serializing_if = "Option::is_none")]
    others_peak_bytes: Option<u64>,
    /// `planned`: the streamed bytes kept resident across bootstraps, and the
    /// largest operation's streamed bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    stable_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    largest_step_bytes: Option<u64>,
    /// `planned`: the bytes per bootstrap the look-ahead's split is
    /// simulated to fetch, and the floor (Belady's demand schedule over all
    /// the room the budget leaves the streamed objects).
    #[serde(skip_serializing_if = "Option::is_none")]
    planned_fetch_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_fetch_bytes: Option<u64>,
    /// `planned`, where the recorded bootstrap was timed on the device: the
    /// stall model's bootstrap under the chosen split (compute and the
    /// waits for copies, ms), its stalls, the window split's bootstrap in
    /// the same model, and the copy rate the model took (GB/s; measured on
    /// the recorded run, or the PCIe Gen5 default).
    #[serde(skip_serializing_if = "Option::is_none")]
    planned_run_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    planned_stall_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window_run_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model_copy_gbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model_copy_rate_measured: Option<bool>,
    /// `planned`: the last timed bootstrap that followed its plan
    /// (`HEMEM_TIME_RUNS=1` times every one), as the device measured it:
    /// its operations' compute and the waits for fetches between them
    /// (ms), the stalls `planned_stall_ms` predicts.
    #[serde(skip_serializing_if = "Option::is_none")]
    measured_compute_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    measured_wait_ms: Option<f64>,
    /// `planned`: how the recorded order is split (`belady`: per gap
    /// between uses; `window`: a stable set and a sliding window; `stalls`:
    /// the window's split improved on the stall model; `auto`: `stalls`
    /// for one bootstrap, `belady` for a batch), and the plan the recording
    /// was split with (`auto` resolved).
    #[serde(skip_serializing_if = "Option::is_none")]
    streaming_plan: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    split_plan: Option<&'static str>,
    /// `planned`: bootstraps whose operations departed from the recorded
    /// order (the look-ahead stopped there), and the step of the last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    plan_departures: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_departure_step: Option<usize>,
    /// `planned`: uses of keys or diagonals read in place from pinned host
    /// memory (no device room could be made), and their bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    zero_copy_uses: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    zero_copy_bytes: Option<u64>,
    /// `planned`: the streaming arena's bytes and chunks at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    arena_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arena_chunks: Option<u64>,
    /// Times the pool refused a request its accounting had room for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pool_refusals: Option<u64>,
    /// Requests placed after a trim, after a wait for the streams, after
    /// evictions.
    #[serde(skip_serializing_if = "Option::is_none")]
    refusals_resolved_after: Option<[u64; 3]>,
    /// The process's peak resident set (Linux `VmHWM`), host memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_rss_bytes: Option<u64>,
    /// With `--chain`: every bootstrap of the chain.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    chain: Vec<ChainStep>,
    /// With `--chain`: the first bootstrap's bits minus the worst one's.
    #[serde(skip_serializing_if = "Option::is_none")]
    chain_spread_bits: Option<f64>,
    /// The residency manager's eviction order (GPU runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    eviction: Option<String>,
    /// Managed bytes prefetched back to the device during each bootstrap
    /// (buffers that had been evicted; 0 under `managed`, whose pages fault
    /// in instead).
    to_device_bytes: Vec<u64>,
    /// Managed bytes evicted to the host during each bootstrap.
    evicted_bytes: Vec<u64>,
    /// With `--cupti`: host→device bytes CUPTI's copy records saw during
    /// each bootstrap.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    cupti_htod_bytes: Vec<u64>,
    /// With `--cupti`: device→host bytes of the copy records.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    cupti_dtoh_bytes: Vec<u64>,
    /// With `--gpu-timeline`: each bootstrap's device time by CUPTI's
    /// kernel and copy records.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    gpu_timeline: Vec<timeline::Idle>,
    /// Buffers evicted during each bootstrap (with `evicted_bytes`, the mean
    /// size of a move).
    evictions: Vec<u64>,
    /// Times the device pool was trimmed during each bootstrap.
    pool_trims: Vec<u64>,
    /// GPU runs under a budget: host milliseconds spent in the residency
    /// driver's calls during each bootstrap, by kind (order, trim, advise_on,
    /// advise_off, to_device, to_host).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    driver_ms: Vec<serde_json::Map<String, serde_json::Value>>,
    /// `planned`: each bootstrap's streaming arena and pool refusals (see
    /// `Movement::residency`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    residency: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Bytes evicted per memory class during the last bootstrap.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    last_evicted_bytes_by_class: serde_json::Map<String, serde_json::Value>,
}

/// Runs the command.
pub fn run(args: &Args) -> anyhow::Result<()> {
    if let Some(devices) = &args.devices {
        return devices::run(args, devices);
    }
    let (preset, params) = super::preset_parameters(&args.preset)?;
    let selection = args.device.selection()?;
    let memory = args.memory.config()?;
    // CUPTI must see the context being made.
    let cupti = if args.cupti {
        Some(hemem_memory::cuda::cupti::MemcpyCounters::enable()?)
    } else {
        None
    };
    let kernels = args
        .gpu_timeline
        .then(hemem_memory::cuda::cupti::KernelTimeline::enable)
        .transpose()?;
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

    let schedule = BootstrapSchedule::recommended_for_slots(
        &params,
        args.slots.unwrap_or_else(|| params.slots()),
    )?;
    let sse = schedule.choice.sse;
    let started = Instant::now();
    let (secret, public, keys, key_load_ms, key_file_bytes) = match &args.keys {
        Some(path) => {
            let loaded = super::keygen::load(&context, path)?;
            progress(&format!(
                "  {} keys ({}) loaded from {} in {:.2} s",
                loaded.keys.len(),
                human_bytes(loaded.file_bytes),
                path.display(),
                loaded.ms / 1e3
            ));
            (
                loaded.secret,
                loaded.public,
                loaded.keys,
                Some(loaded.ms),
                Some(loaded.file_bytes),
            )
        }
        None => {
            let keygen = KeyGenerator::new(&context)?.with_uniform_prf(args.uniform_prf.into());
            let secret = keygen.secret_key()?;
            let public = keygen.public_key(&secret)?;
            let keys = super::progress::with_bar("keys", args.json, |p| {
                BootstrapKeys::generate_with_progress(&keygen, &secret, &schedule, p)
            })?;
            progress(&format!(
                "  {} keys ({}) generated",
                keys.len(),
                human_bytes(keys.size_bytes() as u64)
            ));
            (secret, public, keys, None, None)
        }
    };
    let mut keys = keys;
    if args.expand_keys {
        keys.expand()?;
    }
    let key_count = keys.len();
    let constants_started = Instant::now();
    let storage: DiagonalStorage = args.diagonals.parse()?;
    let hoisting: Hoisting = args.hoisting.parse()?;
    let bootstrapper = super::progress::with_bar("diagonals", args.json, |p| {
        Bootstrapper::with_progress(
            &context,
            schedule,
            keys,
            BootstrapOptions {
                storage,
                hoisting,
                working_reserve: args.fit_reserve,
                shared_expansions: args.shared_expansions,
            },
            p,
        )
    })?;
    // The input is encrypted at the encryption level and levelled down, so
    // it keeps that level's default scale: SlotToCoeff is encoded for it now.
    // Taken after the bootstrapper, so that `fit` may store key halves.
    let key_set = Arc::clone(bootstrapper.key_set());
    let key_bytes = bootstrapper.key_bytes();
    let enc = params.enc_level();
    bootstrapper.prepare_for_scale(params.default_scale(enc)?)?;
    context.synchronize()?;
    // The peak so far is key setup's (keys, diagonals, tables), so that a
    // peak past the budget can be told from the bootstraps'.
    let setup_peak = context
        .backend()
        .allocator()
        .residency_usage()
        .map(|u| u.peak_device);
    let setup_ms = started.elapsed().as_secs_f64() * 1e3;
    let constant_ms = constants_started.elapsed().as_secs_f64() * 1e3;
    let (key_setup_ms, constant_setup_ms) = if key_load_ms.is_some() {
        progress(&format!(
            "  DFT diagonals encoded in {:.1} s",
            constant_ms / 1e3
        ));
        (None, Some(constant_ms))
    } else {
        progress(&format!(
            "  key setup {:.1} s (keys and encoded DFT diagonals)",
            setup_ms / 1e3
        ));
        (Some(setup_ms), None)
    };

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

    let batch = args.batch.max(1);
    if batch > 1 && args.chain {
        anyhow::bail!("--batch and --chain cannot be combined");
    }
    let mut times = Vec::with_capacity(args.iterations.max(1));
    let mut chain = Vec::new();
    let decryptor = Decryptor::new(&context);
    let decode = |ct: &Ciphertext| -> anyhow::Result<Vec<Complex64>> {
        Ok(encoder.decode(&decryptor.decrypt(ct, &secret)?)?)
    };
    let error = |got: &[Complex64], want: &[Complex64]| -> f64 {
        if args.complex {
            max_abs_error(got, want)
        } else {
            got.iter()
                .zip(want)
                .map(|(a, b)| (a.re - b.re).abs())
                .fold(0.0, f64::max)
        }
    };
    let evaluator = Evaluator::with_keys(&context, key_set);
    let post = params
        .post_bootstrap_level()
        .ok_or_else(|| anyhow::anyhow!("{preset} is not bootstrappable"))?;
    let mut input = ct;
    let mut expected = values.clone();
    let mut out = None;
    let (mut to_device_bytes, mut evicted_bytes) = (Vec::new(), Vec::new());
    let (mut cupti_htod_bytes, mut cupti_dtoh_bytes) = (Vec::new(), Vec::new());
    let mut gpu_timeline = Vec::new();
    let (mut evictions, mut pool_trims) = (Vec::new(), Vec::new());
    let mut driver_ms = Vec::new();
    let mut residency_runs = Vec::new();
    let mut submit_ms = Vec::new();
    let mut last_evicted_bytes_by_class = serde_json::Map::new();
    for i in 0..args.iterations.max(1) {
        let before = if args.chain {
            Some(decode(&input)?)
        } else {
            None
        };
        let copies = if batch > 1 {
            (0..batch)
                .map(|_| input.clone_as(MemoryClass::Ciphertext))
                .collect::<Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        if let Some(c) = &cupti {
            settle_copies(&context)?;
            c.collect()?;
        }
        if let Some(k) = &kernels {
            k.collect()?;
        }
        let moved_before = Snapshot::take(&context);
        // The last bootstrap is bracketed by cuProfilerStart/Stop, so that
        // `ncu --profile-from-start off` sees one warm bootstrap only.
        let profiled = i + 1 == args.iterations.max(1);
        let gpu = context.backend().allocator().device().filter(|_| profiled);
        if let Some(d) = gpu {
            d.set_profiling(true)?;
        }
        let t = Instant::now();
        let result = match (batch > 1, args.complex) {
            (true, complex) => {
                let mut outs = if complex {
                    bootstrapper.bootstrap_many(&copies)?
                } else {
                    bootstrapper.bootstrap_real_many(&copies)?
                };
                drop(copies);
                outs.truncate(1);
                outs.pop()
                    .ok_or_else(|| anyhow::anyhow!("an empty batch came back"))?
            }
            (false, true) => bootstrapper.bootstrap(&input)?,
            (false, false) => bootstrapper.bootstrap_real(&input)?,
        };
        submit_ms.push(t.elapsed().as_secs_f64() * 1e3 / batch as f64);
        context.synchronize()?;
        let ms = t.elapsed().as_secs_f64() * 1e3 / batch as f64;
        if let Some(d) = gpu {
            d.set_profiling(false)?;
        }
        if let Some(c) = &cupti {
            settle_copies(&context)?;
            let copies = c.collect()?;
            cupti_htod_bytes.push(copies.htod_bytes);
            cupti_dtoh_bytes.push(copies.dtoh_bytes);
        }
        if let Some(k) = &kernels {
            gpu_timeline.push(timeline::Idle::of(&k.collect()?.summary()));
        }
        let movement = Snapshot::take(&context).since(&moved_before);
        let moved = format!(
            "{} back to the device, {} evicted",
            human_bytes(movement.to_device),
            human_bytes(movement.evicted)
        );
        times.push(ms);
        to_device_bytes.push(movement.to_device);
        evicted_bytes.push(movement.evicted);
        evictions.push(movement.evictions);
        pool_trims.push(movement.pool_trims);
        driver_ms.extend(movement.driver_ms);
        residency_runs.extend(movement.residency);
        last_evicted_bytes_by_class = movement.evicted_by_class;
        if let Some(before) = before {
            let after = decode(&result)?;
            let step = ChainStep {
                ms,
                bits: precision_bits(error(&after, &before)),
                end_to_end_bits: precision_bits(error(&after, &expected)),
            };
            progress(&format!(
                "  bootstrap {i}: {ms:.1} ms, {:.2} bits ({:.2} end to end), {moved}",
                step.bits, step.end_to_end_bits
            ));
            chain.push(step);
            // Multiply by fresh ±1 values: the magnitudes stay in range.
            let signs: Vec<Complex64> = (0..slots)
                .map(|_| {
                    let s = if sampler.uniform_f64() < 0.5 {
                        -1.0
                    } else {
                        1.0
                    };
                    Complex64::new(s, 0.0)
                })
                .collect();
            let factor = Encryptor::new(&context)?.encrypt(
                &encoder.encode_at(&signs, post, params.default_scale(post)?, slots)?,
                &public,
            )?;
            let product = evaluator.mult(&result, &factor)?;
            for (e, f) in expected.iter_mut().zip(&signs) {
                *e *= f;
            }
            input = evaluator.level_down(&product, Level(3))?;
        } else {
            progress(&format!("  bootstrap {i}: {ms:.1} ms, {moved}"));
        }
        out = Some(result);
    }
    let out = out.ok_or_else(|| anyhow::anyhow!("no bootstrap ran"))?;
    let got = decode(&out)?;
    // End to end against the inputs (times the chain's factors but the last,
    // which the output does not include yet).
    let err = if args.chain {
        chain.last().map_or(0.0, |s| 2f64.powf(-s.end_to_end_bits))
    } else {
        error(&got, &values)
    };
    let chain_spread_bits = chain
        .first()
        .map(|first| first.bits - chain.iter().map(|s| s.bits).fold(f64::INFINITY, f64::min));
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median_ms = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    let (peak_bytes_by_class, peak_device_bytes_by_class) = peaks(
        &context.memory_statistics(),
        matches!(context.device(), Device::Gpu(_)),
    );
    let residency = context.backend().allocator().residency();
    let usage = residency.map(|r| r.usage());
    if let Some(path) = &args.streaming_trace {
        let trace = residency
            .and_then(|r| r.streaming_trace())
            .ok_or_else(|| anyhow::anyhow!("--streaming-trace: no phase was recorded (the planned policy under a budget records one)"))?;
        trace.write(path)?;
    }
    let trace_written = context
        .backend()
        .allocator()
        .write_trace()?
        .map(|path| path.display().to_string());
    let policy_divergence = context
        .backend()
        .allocator()
        .policy_divergence()
        .map(|e| e.to_string());
    let report = Report {
        trace_written,
        policy_divergence,
        preset: preset.name().into(),
        device: context.device().to_string(),
        memory_policy: memory.policy.kind().name().into(),
        slots,
        complex: args.complex,
        iterations: times.len(),
        batch,
        sub_batch: Some(bootstrapper.batch_limit()).filter(|&n| n < batch),
        key_setup_ms,
        key_load_ms,
        constant_setup_ms,
        key_file_bytes,
        bootstrap_ms: times,
        submit_ms,
        median_ms,
        max_abs_error: err,
        precision_bits: precision_bits(err),
        output_level: out.level().get(),
        keys: key_count,
        key_set_bytes: key_bytes,
        constant_bytes: bootstrapper.constant_bytes(),
        constant_encoded_bytes: bootstrapper.constant_encoded_bytes(),
        diagonal_storage: bootstrapper.storage().name(),
        shared_expansions: bootstrapper.shared_expansions(),
        keys_expanded: bootstrapper.expanded_keys(),
        uniform_prf: key_load_ms
            .is_none()
            .then(|| SeedPrf::from(args.uniform_prf).name()),
        hoisting: bootstrapper.hoisting().name(),
        sse,
        peak_bytes_by_class,
        peak_device_bytes_by_class,
        peak_device_resident_bytes: usage.map(|u| u.peak_device),
        setup_peak_device_resident_bytes: setup_peak,
        device_budget_bytes: usage.map(|u| u.budget),
        pool_peak_bytes: context.backend().allocator().pool_reserved_peak_bytes()?,
        streamed_bytes: usage.map(|u| u.streamed_allocated),
        prefetched_bytes: usage.map(|u| u.prefetched_bytes),
        others_peak_bytes: usage.map(|u| u.others_peak),
        stable_bytes: usage.map(|u| u.stable_bytes),
        largest_step_bytes: usage.map(|u| u.largest_step_bytes),
        planned_fetch_bytes: usage.map(|u| u.planned_bytes),
        floor_fetch_bytes: usage.map(|u| u.floor_bytes),
        planned_run_ms: usage.and_then(|u| u.planned_run_ns).map(ms),
        planned_stall_ms: usage.and_then(|u| u.planned_stall_ns).map(ms),
        window_run_ms: usage.and_then(|u| u.window_run_ns).map(ms),
        model_copy_gbps: usage
            .and_then(|u| u.model_copy_rate)
            .map(|r| r as f64 / 1e9),
        model_copy_rate_measured: usage.and_then(|u| u.model_copy_rate_measured),
        measured_compute_ms: usage.and_then(|u| u.measured_compute_ns).map(ms),
        measured_wait_ms: usage.and_then(|u| u.measured_wait_ns).map(ms),
        streaming_plan: usage.map(|u| u.streaming_plan.name()),
        split_plan: usage.and_then(|u| u.split_plan).map(|p| p.name()),
        plan_departures: usage.map(|u| u.departures),
        last_departure_step: usage.and_then(|u| u.last_departure),
        zero_copy_uses: usage.map(|u| u.zero_copy_uses),
        zero_copy_bytes: usage.map(|u| u.zero_copy_bytes),
        arena_bytes: usage.map(|u| u.arena_bytes),
        arena_chunks: usage.map(|u| u.arena_chunks),
        pool_refusals: usage.map(|u| u.pool_refusals),
        refusals_resolved_after: usage.map(|u| u.refusals_resolved_after),
        peak_rss_bytes: peak_rss_bytes(),
        chain,
        chain_spread_bits,
        eviction: residency.map(|r| r.eviction().name().to_owned()),
        to_device_bytes,
        evicted_bytes,
        cupti_htod_bytes,
        cupti_dtoh_bytes,
        gpu_timeline,
        evictions,
        pool_trims,
        driver_ms,
        residency: residency_runs,
        last_evicted_bytes_by_class,
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
        let setup = match (report.key_setup_ms, report.key_load_ms) {
            (Some(ms), _) => format!("key setup {:.1} s", ms / 1e3),
            (None, Some(ms)) => format!(
                "keys loaded in {:.2} s, diagonals encoded in {:.1} s",
                ms / 1e3,
                report.constant_setup_ms.unwrap_or(0.0) / 1e3
            ),
            (None, None) => String::new(),
        };
        out!(
            "{setup}; {} keys, {}{}; constants {} ({}, {} encoded); SSE {}",
            report.keys,
            human_bytes(report.key_set_bytes as u64),
            match report.keys_expanded {
                0 => String::new(),
                n => format!(" ({n} stored in full)"),
            },
            human_bytes(report.constant_bytes as u64),
            report.diagonal_storage,
            human_bytes(report.constant_encoded_bytes as u64),
            if sse { "yes" } else { "no" }
        );
        if let Some(spread) = report.chain_spread_bits {
            out!(
                "chain of {}: every bootstrap within {spread:.2} bits of the first",
                report.chain.len()
            );
        }
        print_by_class("peak memory by class:", &report.peak_bytes_by_class)?;
        if let Some(rss) = report.peak_rss_bytes {
            out!("peak resident set (host): {}", human_bytes(rss));
        }
        if let (Some(peak), Some(budget)) = (
            report.peak_device_resident_bytes,
            report.device_budget_bytes,
        ) {
            out!(
                "peak device-resident bytes: {} (budget {})",
                human_bytes(peak),
                human_bytes(budget)
            );
        }
        if let Some(path) = &report.trace_written {
            out!("allocation trace written to {path}");
        }
        if let Some(divergence) = &report.policy_divergence {
            out!("the profiled replay left its recording ({divergence}); placed by class after");
        }
    }
    Ok(())
}

/// Nanoseconds in milliseconds.
fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}
