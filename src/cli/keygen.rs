//! `hemem keygen`: generate a preset's bootstrapping keys once and save them,
//! so `hemem bootstrap --keys FILE` and `hemem demo --keys FILE` load them
//! instead of generating them on every run.
//!
//! Three files, side by side:
//! - `FILE`: the bootstrap key set (relinearisation, conjugation, rotation
//!   and sparse-secret encapsulation keys; public material, compact form);
//! - `FILE.public`: the public encryption key;
//! - `FILE.secret`: the secret key (mode 0600 on Unix).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use hemem_bootstrap::bootstrapper::MAX_LOG_BSGS_RATIO;
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, BootstrapOptions, Bootstrapper};
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::SeedPrf;
use serde::Serialize;

use super::device::DeviceArgs;
use super::report::human_bytes;

/// Arguments of `hemem keygen`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Files written: FILE (bootstrap key set: relinearisation, conjugation, \
rotation and sparse-secret encapsulation keys, compact, public), FILE.public (public key) and \
FILE.secret (secret key, mode 0600). Use them with `hemem bootstrap --keys FILE` or \
`hemem demo --keys FILE` and the same --preset (and --slots).

Examples:
  hemem keygen --preset FTb --out ftb.keys
  hemem keygen --preset FGb --slots 4096 --out fgb-4k.keys --json"
)]
pub struct Args {
    /// Parameter preset (bootstrappable: FGa, FGb, FVa, FVb, FVc, FTa, FTb, test-*).
    #[arg(long)]
    preset: String,
    /// The bootstrap key file; the public and secret keys go to FILE.public
    /// and FILE.secret.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    #[command(flatten)]
    device: DeviceArgs,
    /// Slot count the keys serve (a power of two up to N/2; default: all).
    #[arg(long)]
    slots: Option<usize>,
    /// The function that expands the switching keys' seeds: chacha12 (the
    /// default) or chacha20 (keys that builds before ChaCha12 can read).
    #[arg(long, value_enum, default_value_t = UniformPrf::Chacha12)]
    uniform_prf: UniformPrf,
    #[command(flatten)]
    bsgs: BsgsArgs,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// `--uniform-prf`: [`SeedPrf`] on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UniformPrf {
    /// ChaCha with 12 rounds (the library's default).
    Chacha12,
    /// ChaCha20: the keys of earlier builds.
    Chacha20,
}

impl From<UniformPrf> for SeedPrf {
    fn from(prf: UniformPrf) -> Self {
        match prf {
            UniformPrf::Chacha12 => Self::ChaCha12,
            UniformPrf::Chacha20 => Self::ChaCha20,
        }
    }
}

/// `--log-bsgs-ratio`, shared by `hemem keygen` and `hemem bootstrap`.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct BsgsArgs {
    /// The DFTs' BSGS ratio, log2: how many baby steps per giant step
    /// each linear transform may take (Lattigo's `FindBestBSGSRatio`).
    /// fit (the default): on a GPU 3, else 2, where the device's room
    /// holds that key set without streaming it, else the next smaller of
    /// 2 and 0 (`Bootstrapper::fit_schedule`; on `keygen`, the room of the
    /// device and budget it runs with; FGa stops at 2, the FV presets
    /// stay at 0); with
    /// `--keys`, the largest ratio the loaded keys serve. 0 needs the
    /// fewest rotation keys; 2 and 3 need more (FGb: 27 and 43 rotations
    /// against 23, +0.31 and +1.51 GB seeded) and run fewer key-switch
    /// decompositions (FGb on the H100: 31.1 and 30.1 ms against 32.7). A
    /// number 0–4 is taken as given.
    #[arg(long = "log-bsgs-ratio", value_name = "fit|LOG", default_value = "fit", value_parser = parse_bsgs_ratio)]
    pub ratio: BsgsRatio,
}

/// What `--log-bsgs-ratio` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BsgsRatio {
    /// [`Bootstrapper::fit_schedule`], or for loaded keys the larger ratio
    /// they serve.
    Fit,
    /// This ratio (`log2`), whatever the memory.
    Log(i32),
}

fn parse_bsgs_ratio(s: &str) -> Result<BsgsRatio, String> {
    if s == "fit" {
        return Ok(BsgsRatio::Fit);
    }
    match s.parse::<i32>() {
        Ok(r) if (0..=MAX_LOG_BSGS_RATIO).contains(&r) => Ok(BsgsRatio::Log(r)),
        _ => Err(format!("expected fit or a number 0..={MAX_LOG_BSGS_RATIO}")),
    }
}

impl BsgsRatio {
    /// The schedule to generate keys for, to be used in every one of
    /// `contexts` by a bootstrapper with `options`: with `Fit`, the
    /// smallest of the ratios [`Bootstrapper::fit_schedule_with`] takes in
    /// each.
    pub fn for_new_keys(
        self,
        contexts: &[Context],
        schedule: BootstrapSchedule,
        options: &BootstrapOptions,
    ) -> hemem_bootstrap::Result<BootstrapSchedule> {
        match self {
            Self::Fit => {
                // The smallest ratio any device fits (each step up the
                // ladder only adds keys).
                let mut fitted: Option<BootstrapSchedule> = None;
                for context in contexts {
                    let mine = Bootstrapper::fit_schedule_with(context, schedule.clone(), options)?;
                    if fitted
                        .as_ref()
                        .is_none_or(|f| mine.log_bsgs_ratio < f.log_bsgs_ratio)
                    {
                        fitted = Some(mine);
                    }
                }
                Ok(fitted.unwrap_or(schedule))
            }
            Self::Log(log_bsgs_ratio) => Ok(BootstrapSchedule {
                log_bsgs_ratio,
                ..schedule
            }),
        }
    }

    /// The schedule to bootstrap with `keys` loaded from `file`: with
    /// `Fit`, the largest of [`BootstrapKeys::log_bsgs_ratios`]
    /// (`schedule`'s where they serve none, for the bootstrapper to name
    /// what is missing); a ratio they do
    /// not serve is refused here, before any key is expanded or diagonal
    /// encoded.
    pub fn for_loaded_keys(
        self,
        keys: &BootstrapKeys,
        params: &Parameters,
        schedule: BootstrapSchedule,
        file: &Path,
    ) -> anyhow::Result<BootstrapSchedule> {
        let with = |log_bsgs_ratio| BootstrapSchedule {
            log_bsgs_ratio,
            ..schedule.clone()
        };
        match self {
            Self::Fit => Ok(keys
                .log_bsgs_ratios(&schedule, params)
                .last()
                .map_or(schedule.clone(), |&r| with(r))),
            Self::Log(r) if keys.serve(&with(r), params) => Ok(with(r)),
            Self::Log(r) => {
                let served: Vec<String> = keys
                    .log_bsgs_ratios(&schedule, params)
                    .iter()
                    .map(i32::to_string)
                    .collect();
                anyhow::bail!(
                    "the keys in {} were made for BSGS ratio {} (hemem keygen --log-bsgs-ratio), not {r}: run with --log-bsgs-ratio fit, or make keys with --log-bsgs-ratio {r}",
                    file.display(),
                    if served.is_empty() {
                        format!("none of 0..={MAX_LOG_BSGS_RATIO}")
                    } else {
                        served.join(", ")
                    }
                )
            }
        }
    }
}

/// Where the public key of the key file `path` lives.
pub fn public_path(path: &Path) -> PathBuf {
    with_suffix(path, ".public")
}

/// Where the secret key of the key file `path` lives.
pub fn secret_path(path: &Path) -> PathBuf {
    with_suffix(path, ".secret")
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The keys of a key file, loaded.
pub struct LoadedKeys {
    /// The secret key (`FILE.secret`).
    pub secret: SecretKey,
    /// The public key (`FILE.public`).
    pub public: PublicKey,
    /// The bootstrap keys (`FILE`).
    pub keys: BootstrapKeys,
    /// Milliseconds to load all three (the match check not counted).
    pub ms: f64,
    /// Bytes of the bootstrap key file.
    pub file_bytes: u64,
}

/// Loads the three files of the key file `path` into `context`.
///
/// # Errors
/// The file's typed error (other parameters, truncated, corrupted, another
/// kind, I/O), with the file named; `KeysDoNotMatch` for files of
/// different key generations.
pub fn load(context: &Context, path: &Path) -> anyhow::Result<LoadedKeys> {
    let preset = context.params().name().to_owned();
    let started = Instant::now();
    let what = |p: &Path, kind: &str| {
        format!(
            "loading the {kind} from {} for preset {preset}",
            p.display()
        )
    };
    let file_bytes = std::fs::metadata(path)
        .with_context(|| what(path, "bootstrap keys"))?
        .len();
    let keys = BootstrapKeys::load_from_path(context, path)
        .with_context(|| what(path, "bootstrap keys"))?;
    let secret_file = secret_path(path);
    let secret = SecretKey::load_from_path(context, &secret_file)
        .with_context(|| what(&secret_file, "secret key"))?;
    let public_file = public_path(path);
    let public = PublicKey::load_from_path(context, &public_file)
        .with_context(|| what(&public_file, "public key"))?;
    context.synchronize()?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    // Each file passes its own checks; whether the three belong together
    // only a test encryption tells (not counted in the load time).
    keys.check_match(context, &secret, &public)
        .with_context(|| {
            format!(
                "checking that {}, {} and {} belong together",
                path.display(),
                public_file.display(),
                secret_file.display()
            )
        })?;
    Ok(LoadedKeys {
        secret,
        public,
        keys,
        ms,
        file_bytes,
    })
}

#[derive(Debug, Serialize)]
struct Report {
    preset: String,
    device: String,
    slots: usize,
    sse: bool,
    /// The BSGS ratio (log2) the keys were made for.
    log_bsgs_ratio: i32,
    keys: usize,
    key_set_bytes: usize,
    keygen_ms: f64,
    save_ms: f64,
    key_file: String,
    key_file_bytes: u64,
    public_key_file: String,
    secret_key_file: String,
}

/// Runs the command.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let (preset, params) = super::preset_parameters(&args.preset)?;
    super::check_output_path(&args.out, "--out")?;
    let selection = args.device.selection()?;
    let memory = MemoryConfig::from_env().context("reading HEMEM_* variables")?;
    if let Some(path) = &memory.record_trace {
        super::check_output_path(path, "HEMEM_RECORD_TRACE")?;
    }
    let context = Context::with_memory(params.clone(), selection, &memory)?;
    let progress = super::progress::Status::new(args.json);
    let schedule = args.bsgs.ratio.for_new_keys(
        std::slice::from_ref(&context),
        BootstrapSchedule::recommended_for_slots(
            &params,
            args.slots.unwrap_or_else(|| params.slots()),
        )?,
        &BootstrapOptions::default(),
    )?;
    let slots = schedule.slots();
    let sse = schedule.choice.sse;
    progress.say(&format!(
        "hemem keygen: {preset} on {}, {slots} slots, BSGS ratio 2^{}, planned {} of keys",
        context.device(),
        schedule.log_bsgs_ratio,
        human_bytes(BootstrapKeys::planned_bytes(&schedule, &params)?)
    ));

    let started = Instant::now();
    let keygen = KeyGenerator::new(&context)?.with_uniform_prf(args.uniform_prf.into());
    let secret = keygen.secret_key()?;
    let public = keygen.public_key(&secret)?;
    let keys = super::progress::with_bar("keys", args.json, |p| {
        BootstrapKeys::generate_with_progress(&keygen, &secret, &schedule, p)
    })?;
    context.synchronize()?;
    let keygen_ms = started.elapsed().as_secs_f64() * 1e3;
    progress.say(&format!(
        "  {} keys ({}) generated in {:.1} s",
        keys.len(),
        human_bytes(keys.size_bytes() as u64),
        keygen_ms / 1e3
    ));

    let started = Instant::now();
    let secret_file = secret_path(&args.out);
    let public_file = public_path(&args.out);
    keys.save_to_path(&args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    public
        .save_to_path(&public_file)
        .with_context(|| format!("writing {}", public_file.display()))?;
    secret
        .save_to_path(&secret_file)
        .with_context(|| format!("writing {}", secret_file.display()))?;
    let save_ms = started.elapsed().as_secs_f64() * 1e3;
    let key_file_bytes = std::fs::metadata(&args.out)?.len();
    progress.say(&format!(
        "  saved in {:.1} s: {} ({}), {}, {} (owner only)",
        save_ms / 1e3,
        args.out.display(),
        human_bytes(key_file_bytes),
        public_file.display(),
        secret_file.display()
    ));

    let report = Report {
        preset: preset.name().into(),
        device: context.device().to_string(),
        slots,
        sse,
        log_bsgs_ratio: schedule.log_bsgs_ratio,
        keys: keys.len(),
        key_set_bytes: keys.size_bytes(),
        keygen_ms,
        save_ms,
        key_file: args.out.display().to_string(),
        key_file_bytes,
        public_key_file: public_file.display().to_string(),
        secret_key_file: secret_file.display().to_string(),
    };
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!(
            "{} keys for {} ({} slots, SSE {}): {} in {}, generated in {:.1} s, saved in {:.1} s",
            report.keys,
            report.preset,
            slots,
            if sse { "yes" } else { "no" },
            human_bytes(key_file_bytes),
            report.key_file,
            keygen_ms / 1e3,
            save_ms / 1e3
        );
    }
    Ok(())
}
