//! Polynomial evaluation as an evaluator operation
//! ([`EvaluatePolynomial`]) on real ciphertexts, against f64: random
//! inputs and coefficients, monomial and Chebyshev bases, the level and
//! default scale it lands on, and its typed errors.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Arc;

use hemem_bootstrap::Error;
use hemem_bootstrap::approx::chebyshev::interpolate;
use hemem_bootstrap::poly_eval::{EvaluatePolynomial, Polynomial};
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{seed32, seeded_rng, unit_interval};
use hemem_ckks::{KeyError, OperandError};
use num_complex::Complex64;
use rand_core::Rng;

struct Setup {
    params: Parameters,
    context: Context,
    secret: SecretKey,
    public: PublicKey,
    evaluator: Evaluator,
}

fn setup(preset: Preset, seed: u64) -> Setup {
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params.clone(), DeviceSelection::Cpu).unwrap();
    let keygen = KeyGenerator::with_seed(&context, seed32(seed));
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let keys = keygen
        .key_set(
            &secret,
            &KeySetRequest {
                relinearization: true,
                ..Default::default()
            },
        )
        .unwrap();
    Setup {
        evaluator: Evaluator::with_keys(&context, Arc::new(keys)),
        params,
        context,
        secret,
        public,
    }
}

impl Setup {
    fn encrypt(&self, values: &[f64]) -> Ciphertext {
        Encryptor::new(&self.context)
            .unwrap()
            .encrypt(
                &Encoder::new(&self.context).encode_real(values).unwrap(),
                &self.public,
            )
            .unwrap()
    }

    fn decrypt(&self, ct: &Ciphertext) -> Vec<Complex64> {
        Encoder::new(&self.context)
            .decode(
                &Decryptor::new(&self.context)
                    .decrypt(ct, &self.secret)
                    .unwrap(),
            )
            .unwrap()
    }

    /// The largest error of `ct` against `poly` at `xs`, after checking the
    /// level and the default scale it landed on.
    fn check(&self, ct: &Ciphertext, input: &Ciphertext, poly: &Polynomial, xs: &[f64]) -> f64 {
        assert_eq!(ct.level().get(), input.level().get() - poly.depth());
        assert_eq!(ct.scale(), self.params.default_scale(ct.level()).unwrap());
        self.decrypt(ct)
            .iter()
            .zip(xs)
            .map(|(got, &x)| (got - Complex64::new(poly.evaluate_f64(x), 0.0)).norm())
            .fold(0.0, f64::max)
    }
}

fn random_coefficients(rng: &mut impl Rng, degree: usize) -> Vec<f64> {
    (0..=degree)
        .map(|_| {
            ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 - 0.5)
                / (1.0 + degree as f64).sqrt()
        })
        .collect()
}

#[test]
fn random_polynomials_land_on_the_default_scale() {
    let s = setup(Preset::TestFGb, 51);
    let mut rng = seeded_rng(51);
    let xs = unit_interval(&mut rng, s.params.slots());
    let x = s.encrypt(&xs);
    for degree in [1usize, 2, 3, 7, 8, 15] {
        let coefficients = random_coefficients(&mut rng, degree);
        for poly in [
            Polynomial::monomial(coefficients.clone()).unwrap(),
            Polynomial::chebyshev(-1.0, 1.0, coefficients.clone()).unwrap(),
        ] {
            let y = s.evaluator.evaluate_polynomial(&x, &poly).unwrap();
            let error = s.check(&y, &x, &poly, &xs);
            println!("degree {degree} {:?}: 2^{:.1}", poly.basis(), error.log2());
            assert!(
                error > 0.0 && error < 2f64.powi(-20),
                "degree {degree}: {error:e}"
            );
        }
    }
}

#[test]
fn results_combine_with_other_default_scale_ciphertexts() {
    // A layer of a network: sigmoid (a Chebyshev fit on [−4, 4], which
    // costs a level for the affine map) of w·x + b, then added to x² taken
    // down to the same level.
    let s = setup(Preset::TestFGb, 52);
    let mut rng = seeded_rng(52);
    let slots = s.params.slots();
    let xs = unit_interval(&mut rng, slots);
    let ws: Vec<f64> = unit_interval(&mut rng, slots)
        .iter()
        .map(|w| 3.0 * w)
        .collect();
    let x = s.encrypt(&xs);
    let sigmoid = |t: f64| 1.0 / (1.0 + (-t).exp());
    let poly =
        Polynomial::chebyshev(-4.0, 4.0, interpolate(sigmoid, -4.0, 4.0, 15).unwrap()).unwrap();
    let affine = s
        .evaluator
        .add_const(
            &s.evaluator.mult_real_values(&x, &ws).unwrap(),
            Complex64::new(0.25, 0.0),
        )
        .unwrap();
    let y = s.evaluator.evaluate_polynomial(&affine, &poly).unwrap();
    let mut square = s.evaluator.square(&x).unwrap();
    while square.level() > y.level() {
        square = s
            .evaluator
            .mult_const(&square, Complex64::new(1.0, 0.0))
            .unwrap();
    }
    let out = s.evaluator.add(&y, &square).unwrap();
    let error = s
        .decrypt(&out)
        .iter()
        .zip(xs.iter().zip(&ws))
        .map(|(got, (&x, &w))| (got.re - (poly.evaluate_f64(w * x + 0.25) + x * x)).abs())
        .fold(0.0, f64::max);
    println!(
        "sigmoid layer: level {}, 2^{:.1}",
        out.level(),
        error.log2()
    );
    assert!(error > 0.0 && error < 2f64.powi(-18), "{error:e}");
    // The fit itself is close to the sigmoid.
    let fit = xs
        .iter()
        .map(|&t| (poly.evaluate_f64(4.0 * t) - sigmoid(4.0 * t)).abs())
        .fold(0.0, f64::max);
    assert!(fit < 1e-4, "{fit:e}");
}

#[test]
fn bad_polynomial_evaluations_are_typed_errors() {
    let s = setup(Preset::TestFGb, 53);
    let xs = unit_interval(&mut seeded_rng(53), 8);
    let x = s.encrypt(&xs);
    let cubic = Polynomial::monomial(vec![0.0, 1.0, 0.0, 1.0]).unwrap();
    let low = s.evaluator.level_down(&x, Level(1)).unwrap();
    assert!(matches!(
        s.evaluator.evaluate_polynomial(&low, &cubic),
        Err(Error::LevelTooLow {
            needed: 2,
            level: 1,
            ..
        })
    ));
    let constant = Polynomial::monomial(vec![0.5]).unwrap();
    assert!(matches!(
        s.evaluator.evaluate_polynomial(&x, &constant),
        Err(Error::InvalidDegree { degree: 0 })
    ));
    assert!(matches!(
        s.evaluator
            .evaluate_polynomial_at_scale(&x, &cubic, Scale(f64::NAN)),
        Err(Error::NonFinite)
    ));
    // A scale far above the prime the last rescale divides by.
    assert!(matches!(
        s.evaluator
            .evaluate_polynomial_at_scale(&x, &cubic, Scale(2f64.powi(120))),
        Err(Error::Ckks(hemem_ckks::Error::Operand(
            OperandError::ScaleOverflow { .. }
        )))
    ));
    // A scale the result's level cannot carry is reported as asked.
    match s
        .evaluator
        .evaluate_polynomial_at_scale(&x, &cubic, Scale(1e300))
    {
        Err(Error::Ckks(hemem_ckks::Error::Operand(OperandError::ScaleOutOfRange {
            scale_log2,
            ..
        }))) => assert!((scale_log2 - 1e300f64.log2()).abs() < 1e-9),
        other => panic!("{:?}", other.map(|_| ())),
    }
    let no_keys = Evaluator::new(&s.context);
    assert!(matches!(
        no_keys.evaluate_polynomial(&x, &cubic),
        Err(Error::Ckks(hemem_ckks::Error::Key(KeyError::NoKeys)))
    ));
    let other = setup(Preset::TestFGb, 54);
    assert!(matches!(
        other.evaluator.evaluate_polynomial(&x, &cubic),
        Err(Error::Ckks(hemem_ckks::Error::Operand(
            OperandError::ContextMismatch
        )))
    ));
}
