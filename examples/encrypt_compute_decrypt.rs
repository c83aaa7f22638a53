//! Encrypt, compute, decrypt: two random complex vectors are encrypted, then
//! added, multiplied (tensor, relinearise, rescale — spelled out), rotated,
//! squared, multiplied by a constant and by plaintext slot values, and put
//! through a polynomial; every intermediate result is decrypted and checked
//! against the same computation in f64.
//!
//! ```sh
//! cargo run --release --example encrypt_compute_decrypt                    # test-FGb on the CPU (insecure, a second)
//! cargo run --release --example encrypt_compute_decrypt -- --preset FGb --device auto
//! ```
//!
//! `tests/examples.rs` runs [`run`] on a test preset and checks each step's
//! error.

use std::error::Error;
use std::sync::Arc;

use clap::Parser;
use hemem::prelude::*;
use num_complex::Complex64;
use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};

/// Encrypt two random vectors, compute on them, decrypt and compare with f64.
#[derive(Debug, Parser)]
struct Args {
    /// Parameter preset (test-* presets are insecure, for trying it out).
    #[arg(long, default_value = "test-FGb")]
    preset: Preset,
    /// cpu, gpu, gpu:N or auto.
    #[arg(long, default_value = "cpu")]
    device: DeviceSelection,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// One computed value: what it is, where it landed, how far it is from f64.
#[derive(Debug, Clone)]
pub struct Step {
    /// The operation.
    pub name: &'static str,
    /// The level of the result.
    pub level: Level,
    /// The largest slot error against the f64 computation.
    pub max_error: f64,
}

/// What [`run`] did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The device the context ran on.
    pub device: Device,
    /// Every step, in order.
    pub steps: Vec<Step>,
}

/// `count` random complex numbers in the unit disk.
fn random_values(rng: &mut ChaCha20Rng, count: usize) -> Vec<Complex64> {
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

/// Encrypts two random vectors on `preset` and `device`, computes on them
/// and returns each step's error against f64.
///
/// # Errors
/// Parameter, key, encryption and evaluation errors.
pub fn run(preset: Preset, device: DeviceSelection, seed: u64) -> Result<Report, Box<dyn Error>> {
    // Parameters and context. Test presets are insecure: say so explicitly.
    let check = if preset.is_test() {
        SecurityCheck::AllowInsecure
    } else {
        SecurityCheck::Enforce
    };
    let params = Parameters::from_preset_with(preset, check)?;
    let context = Context::new(params.clone(), device)?;

    // Keys: secret, public, and the evaluation keys the computation needs
    // (relinearisation for products, a rotation key for the step 1).
    let keygen = KeyGenerator::new(&context)?;
    let secret = keygen.secret_key()?;
    let public = keygen.public_key(&secret)?;
    let keys = keygen.key_set(
        &secret,
        &KeySetRequest {
            relinearization: true,
            rotations: vec![1],
            ..Default::default()
        },
    )?;
    let evaluator = Evaluator::with_keys(&context, Arc::new(keys));
    let encoder = Encoder::new(&context);
    let encryptor = Encryptor::new(&context)?;
    let decryptor = Decryptor::new(&context);

    // Two random vectors filling every slot, encrypted at the top level.
    let slots = params.slots();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let x = random_values(&mut rng, slots);
    let y = random_values(&mut rng, slots);
    let cx = encryptor.encrypt(&encoder.encode(&x)?, &public)?;
    let cy = encryptor.encrypt(&encoder.encode(&y)?, &public)?;

    let mut steps = Vec::new();
    let mut check = |name, ct: &Ciphertext, expected: &[Complex64]| -> Result<(), Box<dyn Error>> {
        let got = encoder.decode(&decryptor.decrypt(ct, &secret)?)?;
        steps.push(Step {
            name,
            level: ct.level(),
            max_error: max_error(&got, expected),
        });
        Ok(())
    };

    // x + y: same level and scale, no noise growth to speak of.
    let sum = evaluator.add(&cx, &cy)?;
    let expected_sum: Vec<Complex64> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    check("x + y", &sum, &expected_sum)?;

    // x · y in three explicit steps: the tensor product has three parts and
    // scale Δ², relinearisation brings it back to two parts, rescaling
    // divides by the top prime, landing on the next level's default scale.
    // (`evaluator.mult` does all three.)
    let tensor = evaluator.tensor(&cx, &cy)?;
    let relinearized = evaluator.relinearize(&tensor)?;
    let product = evaluator.rescale(&relinearized)?;
    let expected_product: Vec<Complex64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    check("x · y", &product, &expected_product)?;

    // Rotation by one slot: slot j now holds slot j + 1.
    let rotated = evaluator.rotate(&product, 1)?;
    let mut expected_rotated = expected_product.clone();
    expected_rotated.rotate_left(1);
    check("rotate(x · y, 1)", &rotated, &expected_rotated)?;

    // x², and a sum of two results at the same level and default scale.
    let square = evaluator.square(&cx)?;
    let combined = evaluator.add(&rotated, &square)?;
    let expected_combined: Vec<Complex64> = expected_rotated
        .iter()
        .zip(&x)
        .map(|(r, a)| r + a * a)
        .collect();
    check("rotate(x · y, 1) + x²", &combined, &expected_combined)?;

    // A complex constant: encoded so that the rescaled result lands on the
    // next level's default scale.
    let c = Complex64::new(0.5, -0.25);
    let scaled = evaluator.mult_const(&combined, c)?;
    let expected_scaled: Vec<Complex64> = expected_combined.iter().map(|v| v * c).collect();
    check("c · (rotate(x · y, 1) + x²)", &scaled, &expected_scaled)?;

    // Plaintext slot values: encoded at the ciphertext's level and at the
    // scale that lands the rescaled product on the next default scale.
    let w = random_values(&mut rng, slots);
    let weighted = evaluator.mult_values(&scaled, &w)?;
    let expected_weighted: Vec<Complex64> =
        expected_scaled.iter().zip(&w).map(|(a, b)| a * b).collect();
    check("w ⊙ c · (…)", &weighted, &expected_weighted)?;

    // A polynomial, p(x) = x³ − x/2 + 1/4: two levels (Paterson–Stockmeyer),
    // landing on the default scale of its level.
    let p = Polynomial::monomial(vec![0.25, -0.5, 0.0, 1.0])?;
    let evaluated = evaluator.evaluate_polynomial(&cx, &p)?;
    let expected_p: Vec<Complex64> = x.iter().map(|v| v * v * v - v * 0.5 + 0.25).collect();
    check("x³ − x/2 + 1/4", &evaluated, &expected_p)?;

    Ok(Report {
        device: context.device(),
        steps,
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let report = run(args.preset, args.device, args.seed)?;
    println!("{} on {}", args.preset, report.device);
    for step in &report.steps {
        println!(
            "{:<32} level {:>2}  max error {:.2e} ({:.1} bits)",
            step.name,
            step.level.get(),
            step.max_error,
            -step.max_error.log2()
        );
    }
    Ok(())
}
