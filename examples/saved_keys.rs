//! Keys and ciphertexts in files: one context makes the parameters, the
//! secret and public keys, the bootstrapping keys (which hold the
//! relinearisation key too) and an encrypted random vector, and writes each
//! to a file; a fresh context, made from the parameter file alone, loads
//! them back, squares the ciphertext, bootstraps it, encrypts a second
//! vector with the loaded public key, and checks both against f64.
//!
//! ```sh
//! cargo run --release --example saved_keys                    # test-FGb on the CPU (insecure, seconds), files in a temporary folder
//! cargo run --release --example saved_keys -- --dir keys/ --device auto
//! ```
//!
//! Objects belong to the context that made them; files (or bytes) are how
//! they move to another context, process or GPU. `tests/examples.rs` runs
//! [`run`] on a test preset.

use std::error::Error;
use std::path::{Path, PathBuf};

use clap::Parser;
use hemem::memory::ByteSize;
use hemem::prelude::*;
use num_complex::Complex64;
use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};

/// Save keys and a ciphertext, load them into a fresh context, compute.
#[derive(Debug, Parser)]
struct Args {
    /// Parameter preset (test-* presets are insecure, for trying it out).
    #[arg(long, default_value = "test-FGb")]
    preset: Preset,
    /// cpu, gpu, gpu:N or auto.
    #[arg(long, default_value = "cpu")]
    device: DeviceSelection,
    /// Folder for the files (default: a new temporary folder).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// The files [`save`] writes in its folder.
const PARAMETERS: &str = "parameters.hemem";
const SECRET_KEY: &str = "secret.key";
const PUBLIC_KEY: &str = "public.key";
const BOOTSTRAP_KEYS: &str = "bootstrap.keys";
const CIPHERTEXT: &str = "input.ct";

/// What [`run`] measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// The device of the loading context.
    pub device: Device,
    /// Bytes of each file written, by name.
    pub files: Vec<(&'static str, u64)>,
    /// The level of the bootstrapped square.
    pub bootstrapped_level: Level,
    /// The largest slot error of the loaded ciphertext's square, bootstrapped.
    pub bootstrap_error: f64,
    /// The largest slot error of a fresh encryption under the loaded public key.
    pub fresh_error: f64,
}

/// `count` random complex numbers in the unit disk.
fn random_values(seed: u64, count: usize) -> Vec<Complex64> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut unit = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    (0..count)
        .map(|_| Complex64::new(unit(), unit()) / 2f64.sqrt())
        .collect()
}

fn max_error(got: &[Complex64], expected: &[Complex64]) -> f64 {
    got.iter()
        .zip(expected)
        .map(|(a, b)| (a - b).norm())
        .fold(0.0, f64::max)
}

/// The key holder's side: makes parameters, keys and a ciphertext of
/// `values` on `device` and writes them to `dir`.
///
/// # Errors
/// Parameter, key and encryption errors; file errors.
pub fn save(
    preset: Preset,
    check: SecurityCheck,
    device: DeviceSelection,
    values: &[Complex64],
    dir: &Path,
) -> Result<(), Box<dyn Error>> {
    let params = Parameters::from_preset_with(preset, check)?;
    let context = Context::new(params.clone(), device)?;
    let keygen = KeyGenerator::new(&context)?;
    let secret = keygen.secret_key()?;
    let public = keygen.public_key(&secret)?;
    // Bootstrapping's keys: relinearisation, conjugation, the DFTs'
    // rotations and (for this schedule) sparse-secret encapsulation.
    let schedule = BootstrapSchedule::recommended(&params)?;
    let keys = BootstrapKeys::generate(&keygen, &secret, &schedule)?;
    let encoder = Encoder::new(&context);
    let ct = Encryptor::new(&context)?.encrypt(&encoder.encode(values)?, &public)?;

    params.save_to_path(dir.join(PARAMETERS))?;
    // Owner-only (0600 on Unix) from the moment the file exists.
    secret.save_to_path(dir.join(SECRET_KEY))?;
    public.save_to_path(dir.join(PUBLIC_KEY))?;
    keys.save_to_path(dir.join(BOOTSTRAP_KEYS))?;
    ct.save_to_path(dir.join(CIPHERTEXT))?;
    Ok(())
}

/// A fresh context from the files in `dir`: loads everything [`save`]
/// wrote, squares and bootstraps the ciphertext, and encrypts `second`
/// with the loaded public key. Returns the report (with `files` empty).
///
/// # Errors
/// Serialization errors (files of other parameters, damaged files), and
/// as [`save`].
pub fn load_and_compute(
    check: SecurityCheck,
    device: DeviceSelection,
    values: &[Complex64],
    second: &[Complex64],
    dir: &Path,
) -> Result<Report, Box<dyn Error>> {
    // The parameters are judged again on loading: a test preset still needs
    // the explicit opt-in.
    let params = Parameters::load_from_path(dir.join(PARAMETERS), check)?;
    let context = Context::new(params.clone(), device)?;
    let secret = SecretKey::load_from_path(&context, dir.join(SECRET_KEY))?;
    let public = PublicKey::load_from_path(&context, dir.join(PUBLIC_KEY))?;
    let keys = BootstrapKeys::load_from_path(&context, dir.join(BOOTSTRAP_KEYS))?;
    // Each file passed its own checks; a test encryption tells whether the
    // three come from one key generation.
    keys.check_match(&context, &secret, &public)?;
    let ct = Ciphertext::load_from_path(&context, dir.join(CIPHERTEXT))?;

    let bootstrapper = Bootstrapper::new(&context, BootstrapSchedule::recommended(&params)?, keys)?;
    // The bootstrapping keys hold the relinearisation key too: the
    // bootstrapper's evaluator shares them.
    let evaluator = bootstrapper.evaluator();
    let encoder = Encoder::new(&context);
    let decryptor = Decryptor::new(&context);

    // Square, drop to the lowest level a bootstrap takes, bootstrap.
    let squared = evaluator.square(&ct)?;
    let low = evaluator.level_down(&squared, Level(3))?;
    let fresh = bootstrapper.bootstrap(&low)?;
    let got = encoder.decode(&decryptor.decrypt(&fresh, &secret)?)?;
    let expected: Vec<Complex64> = values.iter().map(|v| v * v).collect();
    let bootstrap_error = max_error(&got, &expected);

    // The loaded public key encrypts for the loaded secret key.
    let ct2 = Encryptor::new(&context)?.encrypt(&encoder.encode(second)?, &public)?;
    let got2 = encoder.decode(&decryptor.decrypt(&ct2, &secret)?)?;
    Ok(Report {
        device: context.device(),
        files: Vec::new(),
        bootstrapped_level: fresh.level(),
        bootstrap_error,
        fresh_error: max_error(&got2, second),
    })
}

/// Both sides on `preset`: [`save`] into `dir`, then [`load_and_compute`].
///
/// # Errors
/// As [`save`] and [`load_and_compute`].
pub fn run(
    preset: Preset,
    device: DeviceSelection,
    dir: &Path,
    seed: u64,
) -> Result<Report, Box<dyn Error>> {
    let check = if preset.is_test() {
        SecurityCheck::AllowInsecure
    } else {
        SecurityCheck::Enforce
    };
    let slots = Parameters::from_preset_with(preset, check)?.slots();
    let values = random_values(seed, slots);
    let second = random_values(seed + 1, slots);
    save(preset, check, device, &values, dir)?;
    let mut report = load_and_compute(check, device, &values, &second, dir)?;
    for name in [
        PARAMETERS,
        SECRET_KEY,
        PUBLIC_KEY,
        BOOTSTRAP_KEYS,
        CIPHERTEXT,
    ] {
        report
            .files
            .push((name, std::fs::metadata(dir.join(name))?.len()));
    }
    Ok(report)
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let temporary;
    let dir = match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.as_path()
        }
        None => {
            temporary = tempfile::tempdir()?;
            temporary.path()
        }
    };
    let report = run(args.preset, args.device, dir, args.seed)?;
    println!(
        "{} on {}, files in {}",
        args.preset,
        report.device,
        dir.display()
    );
    for (name, bytes) in &report.files {
        println!("  {name:<18} {}", ByteSize(*bytes));
    }
    println!(
        "loaded ciphertext squared and bootstrapped to level {}: max error {:.2e} ({:.1} bits)",
        report.bootstrapped_level.get(),
        report.bootstrap_error,
        -report.bootstrap_error.log2()
    );
    println!(
        "fresh encryption under the loaded public key: max error {:.2e} ({:.1} bits)",
        report.fresh_error,
        -report.fresh_error.log2()
    );
    Ok(())
}
