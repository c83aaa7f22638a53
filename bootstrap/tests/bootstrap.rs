//! Bootstrapping on real ciphertexts against the f64 reference, on the test
//! presets (CI) — full bootstraps, sub-steps, bookkeeping and errors.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::time::Instant;

use hemem_bootstrap::schedule::{BootstrapSchedule, recommended_choice};
use hemem_bootstrap::{BootstrapKeys, Bootstrapper};
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{seed32, seeded_rng, unit_disk, unit_interval};
use num_complex::Complex64;

struct Setup {
    context: Context,
    secret: SecretKey,
    public: PublicKey,
    bootstrapper: Bootstrapper,
}

fn setup(preset: Preset, slots: Option<usize>) -> Setup {
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params.clone(), DeviceSelection::Cpu).unwrap();
    let keygen = KeyGenerator::with_seed(&context, seed32(preset as u64));
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let schedule =
        BootstrapSchedule::new(&params, recommended_choice(preset.shape_of()), slots).unwrap();
    let t = Instant::now();
    let keys = BootstrapKeys::generate(&keygen, &secret, &schedule).unwrap();
    let count = keys.len();
    let bootstrapper = Bootstrapper::new(&context, schedule, keys).unwrap();
    println!(
        "{preset}: {count} keys, set up in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    Setup {
        context,
        secret,
        public,
        bootstrapper,
    }
}

fn max_error(a: &[Complex64], b: &[Complex64], real: bool) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            if real {
                (x.re - y.re).abs()
            } else {
                (x - y).norm()
            }
        })
        .fold(0.0, f64::max)
}

fn run(s: &Setup, real: bool, seed: u64) -> f64 {
    let params = s.context.params();
    let slots = s.bootstrapper.schedule().slots();
    let mut rng = seeded_rng(seed);
    let values: Vec<Complex64> = if real {
        unit_interval(&mut rng, slots)
            .into_iter()
            .map(|x| Complex64::new(x, 0.0))
            .collect()
    } else {
        unit_disk(&mut rng, slots)
    };
    let encoder = Encoder::new(&s.context);
    let enc = params.enc_level();
    let pt = encoder
        .encode_at(&values, enc, params.default_scale(enc).unwrap(), slots)
        .unwrap();
    let ct = Encryptor::with_seed(&s.context, seed32(seed))
        .encrypt(&pt, &s.public)
        .unwrap();
    let ct = Evaluator::new(&s.context)
        .level_down(&ct, Level(3))
        .unwrap();
    let t = Instant::now();
    let out = if real {
        s.bootstrapper.bootstrap_real(&ct)
    } else {
        s.bootstrapper.bootstrap(&ct)
    }
    .unwrap();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let post = params.post_bootstrap_level().unwrap();
    assert_eq!(out.level(), post);
    assert_eq!(
        out.scale(),
        params.default_scale(post).unwrap(),
        "the output scale is the default, bit for bit"
    );
    let got = encoder
        .decode(&Decryptor::new(&s.context).decrypt(&out, &s.secret).unwrap())
        .unwrap();
    let bits = -max_error(&got, &values, real).log2();
    println!(
        "{}: {} bootstrap, {slots} slots: {bits:.2} bits in {ms:.0} ms",
        params.name(),
        if real { "real" } else { "complex" }
    );
    bits
}

#[test]
fn test_fgb_bootstraps() {
    let s = setup(Preset::TestFGb, None);
    assert!(run(&s, true, 1) > 18.0);
    assert!(run(&s, false, 2) > 18.0);
}

#[test]
#[ignore = "real preset: gigabytes of keys; run with --ignored --test-threads=1"]
fn real_fgb_bootstraps() {
    let s = setup(Preset::FGb, None);
    assert!(run(&s, true, 11) > 23.0);
    run(&s, false, 12);
}
