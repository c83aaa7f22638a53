//! Encryption, decryption and key-free arithmetic against an f64 reference,
//! on every preset's structure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use hemem_ckks::params::ParametersSpec;
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{max_abs_error, seed32, seeded_rng, unit_disk};
use hemem_ckks::{Error, OperandError};
use num_complex::Complex64;

struct Setup {
    context: Context,
    secret: SecretKey,
    public: PublicKey,
    encoder: Encoder,
    encryptor: Encryptor,
    decryptor: Decryptor,
}

fn setup(preset: Preset, seed: u64) -> Setup {
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params, DeviceSelection::Cpu).unwrap();
    let keygen = KeyGenerator::with_seed(&context, seed32(seed));
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    Setup {
        encoder: Encoder::new(&context),
        encryptor: Encryptor::with_seed(&context, seed32(seed + 1)),
        decryptor: Decryptor::new(&context),
        context,
        secret,
        public,
    }
}

fn bits(error: f64) -> f64 {
    -error.log2()
}

/// The precision public-key encryption must keep at the encryption level:
/// the ModDown rounding noise √((1+h)/12) per coefficient becomes √N times
/// that in a slot (RMS). The slot error is a product `δ1(ζ)·s(ζ)` of two
/// evaluations, so its tail is heavier than a Gaussian's: over N/2 slots the
/// maximum reaches about 6× the RMS (measured on FGb); 8× leaves margin.
fn expected_bits(params: &Parameters) -> f64 {
    let h = params.hamming_weight() as f64;
    let n = params.degree().get() as f64;
    let sigma_slot = ((1.0 + h) / 12.0).sqrt() * n.sqrt();
    params.default_scale(params.enc_level()).unwrap().log2() - (8.0 * sigma_slot).log2()
}

fn check_public_key_precision(preset: Preset, min_bits: Option<f64>) {
    let s = setup(preset, 100 + preset as u64);
    let mut rng = seeded_rng(7 + preset as u64);
    let slots = s.context.params().slots();
    let values = unit_disk(&mut rng, slots);
    let pt = s.encoder.encode(&values).unwrap();
    let ct = s.encryptor.encrypt(&pt, &s.public).unwrap();
    assert_eq!(ct.level(), s.context.params().enc_level());
    assert_eq!(ct.scale(), pt.scale());
    let out = s
        .encoder
        .decode(&s.decryptor.decrypt(&ct, &s.secret).unwrap())
        .unwrap();
    let got = bits(max_abs_error(&values, &out));
    let floor = min_bits.unwrap_or_else(|| expected_bits(s.context.params()));
    eprintln!("{preset}: public-key encryption keeps {got:.2} bits (required {floor:.2})");
    assert!(got >= floor, "{preset}: {got:.2} bits < {floor:.2}");
}

#[test]
fn fgb_public_key_encryption_keeps_29_bits() {
    check_public_key_precision(Preset::FGb, Some(29.0));
}

#[test]
fn every_heaan_preset_encrypts_within_its_noise_bound() {
    for preset in [
        Preset::FGa,
        Preset::FTa,
        Preset::FTb,
        Preset::FVa,
        Preset::FVb,
        Preset::FVc,
    ] {
        check_public_key_precision(preset, None);
    }
}

#[test]
fn every_test_preset_encrypts_within_its_noise_bound() {
    for preset in Preset::TEST {
        check_public_key_precision(preset, None);
    }
}

#[test]
fn symmetric_encryption_and_levels() {
    let s = setup(Preset::TestFGb, 5);
    let mut rng = seeded_rng(5);
    let params = s.context.params().clone();
    for level in [3usize, 7, 12, 20, 24] {
        let level = Level(level);
        let values = unit_disk(&mut rng, 64);
        let scale = params.default_scale(level).unwrap();
        let pt = s.encoder.encode_at(&values, level, scale, 64).unwrap();
        let ct = s.encryptor.encrypt_symmetric(&pt, &s.secret).unwrap();
        let out = s
            .encoder
            .decode(&s.decryptor.decrypt(&ct, &s.secret).unwrap())
            .unwrap();
        assert!(bits(max_abs_error(&values, &out)) > 25.0, "level {level}");
        let ct = s.encryptor.encrypt(&pt, &s.public).unwrap();
        let out = s
            .encoder
            .decode(&s.decryptor.decrypt(&ct, &s.secret).unwrap())
            .unwrap();
        assert!(bits(max_abs_error(&values, &out)) > 25.0, "level {level}");
    }
}

#[test]
fn key_free_arithmetic_matches_f64() {
    let s = setup(Preset::TestFGb, 9);
    let eval = Evaluator::new(&s.context);
    let mut rng = seeded_rng(9);
    let slots = s.context.params().slots();
    let (x, y) = (unit_disk(&mut rng, slots), unit_disk(&mut rng, slots));
    let (px, py) = (s.encoder.encode(&x).unwrap(), s.encoder.encode(&y).unwrap());
    let (cx, cy) = (
        s.encryptor.encrypt(&px, &s.public).unwrap(),
        s.encryptor.encrypt(&py, &s.public).unwrap(),
    );
    let decode = |ct: &Ciphertext| {
        s.encoder
            .decode(&s.decryptor.decrypt(ct, &s.secret).unwrap())
            .unwrap()
    };
    let expect = |f: &dyn Fn(Complex64, Complex64) -> Complex64| -> Vec<Complex64> {
        x.iter().zip(&y).map(|(&a, &b)| f(a, b)).collect()
    };
    let c = Complex64::new(0.375, -0.8125);
    let cases: Vec<(&str, Ciphertext, Vec<Complex64>)> = vec![
        ("add", eval.add(&cx, &cy).unwrap(), expect(&|a, b| a + b)),
        ("sub", eval.sub(&cx, &cy).unwrap(), expect(&|a, b| a - b)),
        ("negate", eval.negate(&cx).unwrap(), expect(&|a, _| -a)),
        (
            "add_plain",
            eval.add_plain(&cx, &py).unwrap(),
            expect(&|a, b| a + b),
        ),
        (
            "sub_plain",
            eval.sub_plain(&cx, &py).unwrap(),
            expect(&|a, b| a - b),
        ),
        (
            "add_const",
            eval.add_const(&cx, c).unwrap(),
            expect(&|a, _| a + c),
        ),
        (
            "sub_const",
            eval.sub_const(&cx, c).unwrap(),
            expect(&|a, _| a - c),
        ),
        (
            "level_down",
            eval.level_down(&cx, Level(3)).unwrap(),
            x.clone(),
        ),
    ];
    for (name, ct, expected) in cases {
        let got = bits(max_abs_error(&decode(&ct), &expected));
        eprintln!("{name}: {got:.2} bits");
        assert!(got > 28.0, "{name}: {got:.2} bits");
    }
    let mut acc = cx.try_clone().unwrap();
    eval.add_assign(&mut acc, &cy).unwrap();
    eval.sub_assign(&mut acc, &cy).unwrap();
    assert!(bits(max_abs_error(&decode(&acc), &x)) > 28.0);
    let down = eval.level_down(&cx, Level(3)).unwrap();
    assert_eq!(down.level(), Level(3));
    assert_eq!(down.scale(), cx.scale());
}

#[test]
fn mismatched_operands_are_typed_errors() {
    let s = setup(Preset::TestFTb, 13);
    let eval = Evaluator::new(&s.context);
    let values = vec![Complex64::new(0.5, 0.5); 16];
    let pt = s.encoder.encode(&values).unwrap();
    let ct = s.encryptor.encrypt(&pt, &s.public).unwrap();
    let unwrap_err = |r: hemem_ckks::Result<Ciphertext>| r.map(|_| ()).unwrap_err();

    let low = eval.level_down(&ct, Level(3)).unwrap();
    assert!(matches!(
        unwrap_err(eval.add(&ct, &low)),
        Error::Operand(OperandError::LevelMismatch { .. })
    ));
    let params = s.context.params();
    let other_scale = s
        .encoder
        .encode_at(
            &values,
            params.enc_level(),
            Scale(2f64.powi(30)),
            params.slots(),
        )
        .unwrap();
    let ct2 = s.encryptor.encrypt(&other_scale, &s.public).unwrap();
    assert!(matches!(
        unwrap_err(eval.add(&ct, &ct2)),
        Error::Operand(OperandError::ScaleMismatch { .. })
    ));
    let sparse = s
        .encoder
        .encode_at(
            &values,
            params.enc_level(),
            params.default_scale(params.enc_level()).unwrap(),
            16,
        )
        .unwrap();
    let ct3 = s.encryptor.encrypt(&sparse, &s.public).unwrap();
    assert!(matches!(
        unwrap_err(eval.add(&ct, &ct3)),
        Error::Operand(OperandError::SlotsMismatch { .. })
    ));
    assert!(matches!(
        unwrap_err(eval.add_plain(&ct, &sparse)),
        Error::Operand(OperandError::SlotsMismatch { .. })
    ));
    assert!(matches!(
        unwrap_err(eval.level_down(&low, Level(4))),
        Error::Operand(OperandError::LevelOutOfRange { .. })
    ));
    assert!(matches!(
        unwrap_err(eval.add_const(&ct, Complex64::new(f64::INFINITY, 0.0))),
        Error::Operand(OperandError::NonFiniteValue)
    ));
    // A ciphertext of another context, even with equal parameters.
    let t = setup(Preset::TestFTb, 13);
    let foreign = t
        .encryptor
        .encrypt(&t.encoder.encode(&values).unwrap(), &t.public)
        .unwrap();
    assert!(matches!(
        unwrap_err(eval.add(&ct, &foreign)),
        Error::Operand(OperandError::ContextMismatch)
    ));
    assert!(matches!(
        s.decryptor.decrypt(&foreign, &s.secret).map(|_| ()),
        Err(Error::Operand(OperandError::ContextMismatch))
    ));
    assert!(matches!(
        s.encryptor.encrypt(&pt, &t.public).map(|_| ()),
        Err(Error::Operand(OperandError::ContextMismatch))
    ));
}

#[test]
fn secret_keys_have_exact_hamming_weight_and_hide_themselves() {
    let s = setup(Preset::TestFGa, 21);
    assert_eq!(s.secret.hamming_weight(), 192);
    let shown = format!("{:?}", s.secret);
    assert!(shown.contains("hamming_weight") && !shown.contains("coefficients"));
}

#[test]
fn device_selection_falls_back_or_fails_cleanly() {
    let params =
        Parameters::from_preset_with(Preset::TestFTb, SecurityCheck::AllowInsecure).unwrap();
    let auto = Context::new(params.clone(), DeviceSelection::Auto).unwrap();
    match Context::new(params, DeviceSelection::Gpu(0)) {
        // No GPU (CI): a typed error, and auto picks the CPU.
        Err(e) => {
            assert!(matches!(e, Error::NoGpu { .. }), "{e}");
            assert_eq!(auto.device(), Device::Cpu);
        }
        Ok(gpu) => {
            assert_eq!(gpu.device(), Device::Gpu(0));
            assert_eq!(auto.device(), Device::Gpu(0));
        }
    }
}

#[test]
fn custom_parameters_build_and_work() {
    let spec = ParametersSpec {
        name: "custom".into(),
        log_n: 12,
        log_slots: 10,
        q_bits: vec![50, 40, 40],
        p_bits: vec![50],
        dnum: 3,
        enc_level: 2,
        post_bootstrap_level: None,
        user_primes: 3,
        hamming_weight: 64,
        insecure_test: false,
        bootstrap_rotation_keys: None,
    };
    // log QP = 180 > 106 at N = 2^12: refused, then accepted on opt-in.
    assert!(matches!(
        Parameters::new(spec.clone(), SecurityCheck::Enforce),
        Err(Error::Parameters(hemem_ckks::ParametersError::Insecure {
            log_qp: 180,
            ..
        }))
    ));
    let params = Parameters::new(spec, SecurityCheck::AllowInsecure).unwrap();
    assert_eq!(params.security().bits, 0);
    let context = Context::new(params, DeviceSelection::Cpu).unwrap();
    let keygen = KeyGenerator::with_seed(&context, seed32(3));
    let sk = keygen.secret_key().unwrap();
    let pk = keygen.public_key(&sk).unwrap();
    let encoder = Encoder::new(&context);
    let values = unit_disk(&mut seeded_rng(3), 1024);
    let ct = Encryptor::with_seed(&context, seed32(4))
        .encrypt(&encoder.encode(&values).unwrap(), &pk)
        .unwrap();
    let out = encoder
        .decode(&Decryptor::new(&context).decrypt(&ct, &sk).unwrap())
        .unwrap();
    assert!(bits(max_abs_error(&values, &out)) > 25.0);
}
