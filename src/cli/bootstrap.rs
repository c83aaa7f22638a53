//! `hemem bootstrap`: K bootstraps on a preset, with time per bootstrap,
//! precision, key-set and constant sizes, and peak memory per class; with
//! `--chain`, K successive bootstraps of one ciphertext with a
//! multiplication between each; with `--devices`, one batch spread over
//! several devices ([`devices`]).

mod devices;
mod report;
mod runs;
mod setup;
mod timeline;

use std::time::Instant;

use hemem::bench::measure::{peak_rss_bytes, peaks};
use hemem_bootstrap::Bootstrapper;
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::{Sampler, SeedPrf};
use hemem_memory::PolicyKind;

use self::report::{Report, ResidencyFigures};
use self::runs::{Outcome, Runner};
use self::setup::HeldKeys;
use super::device::DeviceArgs;
use super::keygen::{BsgsArgs, UniformPrf};
use super::memory::MemoryArgs;
use super::progress::Status;
use super::report::precision_bits;

/// Arguments of `hemem bootstrap`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Parameter preset (bootstrappable: FGa, FGb, FVa, FVb, FVc, FTa, FTb, test-*).
    #[arg(long, default_value = "FGb")]
    preset: String,
    #[command(flatten)]
    device: DeviceArgs,
    /// Bootstraps to run (timed one by one).
    #[arg(long, default_value_t = 3, value_parser = super::at_least_one)]
    iterations: usize,
    /// Bootstrap B copies of the input at once, stage by stage
    /// (`Bootstrapper::bootstrap_many`): each key and diagonal serves the
    /// whole batch; times are per ciphertext, bytes moved per batch (B at
    /// most 1024).
    #[arg(long, default_value_t = 1, value_name = "B", value_parser = super::batch_size)]
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
    #[arg(long, value_name = "N", requires = "devices", value_parser = super::at_least_one)]
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
    #[command(flatten)]
    bsgs: BsgsArgs,
    /// With `--diagonals fit`: the working memory left free beside what is
    /// kept in full, in top-level ciphertexts (default: 32 under the
    /// `planned` policy, which streams what an estimate leaves short; 48
    /// under the others). `--log-bsgs-ratio fit` leaves the same room.
    #[arg(long, value_name = "CIPHERTEXTS")]
    fit_reserve: Option<u64>,
    /// With `--batch`: how many ciphertexts share each expansion of a
    /// compact diagonal (default 2; 1 expands for each ciphertext; more
    /// holds more baby-step rotations at once).
    #[arg(long, value_name = "N", value_parser = super::at_least_one)]
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

/// Runs the command.
pub fn run(args: &Args) -> anyhow::Result<()> {
    if let Some(devices) = &args.devices {
        return devices::run(args, devices);
    }
    if args.batch > 1 && args.chain {
        anyhow::bail!("--batch and --chain cannot be combined");
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
    let options = setup::options(args)?;
    if let Some(path) = &args.streaming_trace {
        super::check_output_path(path, "--streaming-trace")?;
    }
    let context = Context::with_memory(params.clone(), selection, &memory)?;
    if context.device() == Device::Cpu
        && let Some(note) = args.memory.cpu_note()
    {
        eprintln!("{note}");
    }
    if args.streaming_trace.is_some()
        && (context.device() == Device::Cpu || memory.policy.kind() != PolicyKind::Planned)
    {
        anyhow::bail!(
            "--streaming-trace: only the planned policy on a GPU records a phase to write"
        );
    }
    let progress = Status::new(args.json);
    progress.say(&format!(
        "hemem bootstrap: {preset} on {}, policy {}",
        context.device(),
        memory.policy.kind().name()
    ));

    let schedule = setup::schedule_for_keys(args, std::slice::from_ref(&context), &options)?;
    let started = Instant::now();
    let HeldKeys {
        secret,
        public,
        mut keys,
        loaded,
        ..
    } = HeldKeys::obtain(args, &context, &schedule, progress)?;
    let schedule = match loaded {
        Some(_) => setup::schedule_for_loaded_keys(
            args,
            std::slice::from_ref(&context),
            &keys,
            schedule,
            &options,
            progress,
        )?,
        None => schedule,
    };
    progress.say(&format!("  BSGS ratio 2^{}", schedule.log_bsgs_ratio));
    let sse = schedule.choice.sse;
    if args.expand_keys {
        keys.expand()?;
    }
    let key_count = keys.len();
    let constants_started = Instant::now();
    let bootstrapper = super::progress::with_bar("diagonals", args.json, |p| {
        Bootstrapper::with_progress(&context, schedule, keys, options, p)
    })?;
    // The input is encrypted at the encryption level and levelled down, so
    // it keeps that level's default scale: SlotToCoeff is encoded for it now.
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
    let (key_setup_ms, constant_setup_ms) = if loaded.is_some() {
        progress.say(&format!(
            "  DFT diagonals encoded in {:.1} s",
            constant_ms / 1e3
        ));
        (None, Some(constant_ms))
    } else {
        progress.say(&format!(
            "  key setup {:.1} s (keys and encoded DFT diagonals)",
            setup_ms / 1e3
        ));
        (Some(setup_ms), None)
    };

    let slots = bootstrapper.schedule().slots();
    let mut sampler = Sampler::from_os()?;
    let values = setup::random_values(&mut sampler, slots, args.complex);
    let pt = Encoder::new(&context).encode_at(&values, enc, params.default_scale(enc)?, slots)?;
    let ct = Encryptor::new(&context)?.encrypt(&pt, &public)?;
    let input = Evaluator::new(&context).level_down(&ct, Level(3))?;
    drop(ct);

    let runner = Runner {
        args,
        context: &context,
        bootstrapper: &bootstrapper,
        secret: &secret,
        public: &public,
        cupti: cupti.as_ref(),
        kernels: kernels.as_ref(),
        progress,
    };
    let Outcome {
        measured,
        chain,
        output,
        error,
    } = runner.run(&values, input, &mut sampler)?;

    let chain_spread_bits = chain
        .first()
        .map(|first| first.bits - chain.iter().map(|s| s.bits).fold(f64::INFINITY, f64::min));
    let (peak_bytes_by_class, peak_device_bytes_by_class) = peaks(
        &context.memory_statistics(),
        matches!(context.device(), Device::Gpu(_)),
    );
    let allocator = context.backend().allocator();
    let residency = allocator.residency();
    if let Some(path) = &args.streaming_trace {
        let trace = residency
            .and_then(|r| r.streaming_trace())
            .ok_or_else(|| anyhow::anyhow!("--streaming-trace: no phase was recorded (the planned policy under a budget records one)"))?;
        trace.write(path)?;
    }
    let batch = args.batch;
    let report = Report {
        trace_written: allocator
            .write_trace()?
            .map(|path| path.display().to_string()),
        policy_divergence: allocator.policy_divergence().map(|e| e.to_string()),
        preset: preset.name().into(),
        device: context.device().to_string(),
        memory_policy: memory.policy.kind().name().into(),
        slots,
        complex: args.complex,
        iterations: measured.bootstrap_ms.len(),
        batch,
        sub_batch: Some(bootstrapper.batch_limit()).filter(|&n| n < batch),
        key_setup_ms,
        key_load_ms: loaded.map(|(ms, _)| ms),
        constant_setup_ms,
        key_file_bytes: loaded.map(|(_, bytes)| bytes),
        median_ms: setup::median(&measured.bootstrap_ms),
        max_abs_error: error,
        precision_bits: precision_bits(error),
        output_level: output.level().get(),
        keys: key_count,
        key_set_bytes: bootstrapper.key_bytes(),
        constant_bytes: bootstrapper.constant_bytes(),
        constant_encoded_bytes: bootstrapper.constant_encoded_bytes(),
        diagonal_storage: bootstrapper.storage().name(),
        shared_expansions: bootstrapper.shared_expansions(),
        keys_expanded: bootstrapper.expanded_keys(),
        uniform_prf: loaded
            .is_none()
            .then(|| SeedPrf::from(args.uniform_prf).name()),
        hoisting: bootstrapper.hoisting().name(),
        log_bsgs_ratio: bootstrapper.schedule().log_bsgs_ratio,
        sse,
        peak_bytes_by_class,
        peak_device_bytes_by_class,
        setup_peak_device_resident_bytes: setup_peak,
        pool_peak_bytes: allocator.pool_reserved_peak_bytes()?,
        residency: residency.map(|r| ResidencyFigures::of(r)),
        peak_rss_bytes: peak_rss_bytes(),
        chain,
        chain_spread_bits,
        measured,
    };
    report.print(args.json)
}
