//! What both forms of `hemem bootstrap` (one device, `--devices`) set up
//! alike: the keys (loaded or generated), the bootstrapper's options, the
//! random inputs and how their error is measured.

use std::path::Path;
use std::time::Instant;

use hemem::bench::measure::Summary;
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, BootstrapOptions};
use hemem_ckks::params::Parameters;
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::Sampler;
use num_complex::Complex64;

use super::super::keygen::BsgsRatio;
use super::super::progress::Status;
use super::super::report::{human_bytes, max_abs_error};
use super::Args;

/// The keys of a run: the key holder's pair and the bootstrapping keys.
pub(super) struct HeldKeys {
    pub secret: SecretKey,
    pub public: PublicKey,
    pub keys: BootstrapKeys,
    /// With `--keys`: milliseconds to load the three files, and the
    /// bootstrap key file's bytes.
    pub loaded: Option<(f64, u64)>,
    /// Without `--keys`: milliseconds to generate them.
    pub generated_ms: Option<f64>,
}

impl HeldKeys {
    /// Loads the keys from `--keys FILE` (made by `hemem keygen` for the
    /// same preset and slots) or generates them for `schedule` in
    /// `context`, with a progress bar.
    pub(super) fn obtain(
        args: &Args,
        context: &Context,
        schedule: &BootstrapSchedule,
        progress: Status,
    ) -> anyhow::Result<Self> {
        match &args.keys {
            Some(path) => Self::load(context, path, progress),
            None => {
                let started = Instant::now();
                let keygen = KeyGenerator::new(context)?.with_uniform_prf(args.uniform_prf.into());
                let secret = keygen.secret_key()?;
                let public = keygen.public_key(&secret)?;
                let keys = super::super::progress::with_bar("keys", args.json, |p| {
                    BootstrapKeys::generate_with_progress(&keygen, &secret, schedule, p)
                })?;
                progress.say(&format!(
                    "  {} keys ({}) generated",
                    keys.len(),
                    human_bytes(keys.size_bytes() as u64)
                ));
                Ok(Self {
                    secret,
                    public,
                    keys,
                    loaded: None,
                    generated_ms: Some(started.elapsed().as_secs_f64() * 1e3),
                })
            }
        }
    }

    fn load(context: &Context, path: &Path, progress: Status) -> anyhow::Result<Self> {
        let loaded = super::super::keygen::load(context, path)?;
        progress.say(&format!(
            "  {} keys ({}) loaded from {} in {:.2} s",
            loaded.keys.len(),
            human_bytes(loaded.file_bytes),
            path.display(),
            loaded.ms / 1e3
        ));
        Ok(Self {
            secret: loaded.secret,
            public: loaded.public,
            keys: loaded.keys,
            loaded: Some((loaded.ms, loaded.file_bytes)),
            generated_ms: None,
        })
    }
}

/// With `--keys`: the schedule for a slot count the loaded keys serve (a
/// key file does not record the count it was made for): `schedule` where
/// they serve its count, else, without `--slots`, the largest count they
/// serve; a `--slots` they do not serve is refused with the counts they
/// do.
pub(super) fn schedule_for_loaded(
    args: &Args,
    params: &Parameters,
    keys: &BootstrapKeys,
    schedule: BootstrapSchedule,
    progress: Status,
) -> anyhow::Result<BootstrapSchedule> {
    let counts = keys.slot_counts(params);
    if counts.contains(&schedule.slots()) {
        return Ok(schedule);
    }
    let file = args
        .keys
        .as_deref()
        .map_or_else(String::new, |p| format!(" in {}", p.display()));
    let served = counts
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    match (args.slots, counts.first()) {
        (None, Some(&slots)) => {
            progress.say(&format!(
                "  the keys serve {slots} slots (made with --slots {slots}): bootstrapping {slots} slots"
            ));
            Ok(BootstrapSchedule::recommended_for_slots(params, slots)?)
        }
        (Some(slots), Some(largest)) => anyhow::bail!(
            "the keys{file} serve {served} slots, not {slots}: run with --slots {largest}, or make keys for {slots} slots (hemem keygen --slots {slots})"
        ),
        (_, None) => anyhow::bail!(
            "the keys{file} serve no slot count of {}: make them with hemem keygen for this preset",
            params.name()
        ),
    }
}

/// The schedule the keys are obtained for: the recommended one for
/// `--slots`, with `--log-bsgs-ratio` fitted on `contexts` for a
/// bootstrapper with `options` where the keys are to be made (with
/// `--keys` the loaded keys choose: [`schedule_for_loaded_keys`]).
pub(super) fn schedule_for_keys(
    args: &Args,
    contexts: &[Context],
    options: &BootstrapOptions,
) -> anyhow::Result<BootstrapSchedule> {
    let Some(params) = contexts.first().map(Context::params) else {
        anyhow::bail!("no device to bootstrap on");
    };
    let recommended = BootstrapSchedule::recommended_for_slots(
        params,
        args.slots.unwrap_or_else(|| params.slots()),
    )?;
    Ok(match args.keys {
        Some(_) => recommended,
        None => args
            .bsgs
            .ratio
            .for_new_keys(contexts, recommended, options)?,
    })
}

/// With `--keys`: the schedule for the slot count ([`schedule_for_loaded`])
/// and the BSGS ratio (`--log-bsgs-ratio`, [`BsgsRatio::for_loaded_keys`])
/// the loaded keys serve, with a note where that ratio is larger than
/// `fit` would take on `contexts` for a bootstrapper with `options` (keys
/// made on another device).
pub(super) fn schedule_for_loaded_keys(
    args: &Args,
    contexts: &[Context],
    keys: &BootstrapKeys,
    schedule: BootstrapSchedule,
    options: &BootstrapOptions,
    progress: Status,
) -> anyhow::Result<BootstrapSchedule> {
    let Some(file) = args.keys.as_deref() else {
        anyhow::bail!("no --keys file to take the schedule from");
    };
    let Some(params) = contexts.first().map(Context::params) else {
        anyhow::bail!("no device to bootstrap on");
    };
    let schedule = schedule_for_loaded(args, params, keys, schedule, progress)?;
    let fewest = BootstrapSchedule {
        log_bsgs_ratio: 0,
        ..schedule.clone()
    };
    let chosen = args
        .bsgs
        .ratio
        .for_loaded_keys(keys, params, schedule, file)?;
    let fitted = BsgsRatio::Fit.for_new_keys(contexts, fewest, options)?;
    if args.bsgs.ratio == BsgsRatio::Fit && chosen.log_bsgs_ratio > fitted.log_bsgs_ratio {
        progress.say(&format!(
            "  note: the keys serve BSGS ratio {}; fit would take {} here (this device's room, kind and preset): make keys on it, or with --log-bsgs-ratio {}",
            chosen.log_bsgs_ratio, fitted.log_bsgs_ratio, fitted.log_bsgs_ratio
        ));
    }
    Ok(chosen)
}

/// The bootstrapper's options from `--diagonals`, `--hoisting`,
/// `--fit-reserve` and `--shared-expansions`.
pub(super) fn options(args: &Args) -> anyhow::Result<BootstrapOptions> {
    Ok(BootstrapOptions {
        storage: args.diagonals.parse()?,
        hoisting: args.hoisting.parse()?,
        working_reserve: args.fit_reserve,
        shared_expansions: args.shared_expansions,
    })
}

/// `slots` random inputs: reals uniform in [−1, 1], or with `complex`
/// complex numbers uniform in the unit disc.
pub(super) fn random_values(sampler: &mut Sampler, slots: usize, complex: bool) -> Vec<Complex64> {
    (0..slots)
        .map(|_| {
            if complex {
                let r = sampler.uniform_f64().sqrt();
                Complex64::from_polar(r, 2.0 * std::f64::consts::PI * sampler.uniform_f64())
            } else {
                Complex64::new(2.0 * sampler.uniform_f64() - 1.0, 0.0)
            }
        })
        .collect()
}

/// The largest error over the slots: of the complex values, or of the real
/// parts alone for a real bootstrap (whose imaginary parts are not kept).
pub(super) fn slot_error(got: &[Complex64], want: &[Complex64], complex: bool) -> f64 {
    if complex {
        max_abs_error(got, want)
    } else {
        got.iter()
            .zip(want)
            .map(|(a, b)| (a.re - b.re).abs())
            .fold(0.0, f64::max)
    }
}

/// The median of `values` ([`Summary::of`]; 0 for none).
pub(super) fn median(values: &[f64]) -> f64 {
    Summary::of(values).map_or(0.0, |s| s.median)
}
