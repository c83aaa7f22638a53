//! Key switching, multiplication, rotation and conjugation against an f64
//! reference, on every preset's structure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Arc;

use hemem_ckks::backend::{Backend, Limbs, LimbsMut};
use hemem_ckks::encoding::CompactPlaintext;
use hemem_ckks::keys::KeyKind;
use hemem_ckks::ntt::{GaloisElement, automorphism_permutation};
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{max_abs_error, random_residues, seed32, seeded_rng, unit_disk};
use hemem_ckks::{Error, KeyError, OperandError};
use hemem_memory::MemoryClass;
use num_complex::Complex64;
use rand_core::Rng;

struct Setup {
    context: Context,
    keygen: KeyGenerator,
    secret: SecretKey,
    public: PublicKey,
    encoder: Encoder,
    encryptor: Encryptor,
    decryptor: Decryptor,
}

impl Setup {
    fn new(preset: Preset, seed: u64) -> Self {
        let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
        let context = Context::new(params, DeviceSelection::Cpu).unwrap();
        let keygen = KeyGenerator::with_seed(&context, seed32(seed));
        let secret = keygen.secret_key().unwrap();
        let public = keygen.public_key(&secret).unwrap();
        Self {
            encoder: Encoder::new(&context),
            encryptor: Encryptor::with_seed(&context, seed32(seed + 1)),
            decryptor: Decryptor::new(&context),
            context,
            keygen,
            secret,
            public,
        }
    }

    fn encrypt(&self, values: &[Complex64]) -> Ciphertext {
        self.encryptor
            .encrypt(&self.encoder.encode(values).unwrap(), &self.public)
            .unwrap()
    }

    fn decrypt(&self, ct: &Ciphertext) -> Vec<Complex64> {
        self.encoder
            .decode(&self.decryptor.decrypt(ct, &self.secret).unwrap())
            .unwrap()
    }

    fn evaluator(&self, request: &KeySetRequest) -> Evaluator {
        let keys = self.keygen.key_set(&self.secret, request).unwrap();
        Evaluator::with_keys(&self.context, Arc::new(keys))
    }
}

fn bits(error: f64) -> f64 {
    -error.log2()
}

fn rotate_left(v: &[Complex64], k: i64) -> Vec<Complex64> {
    let n = v.len() as i64;
    (0..n)
        .map(|j| v[((j + k).rem_euclid(n)) as usize])
        .collect()
}

/// Every operation once, at the encryption level, on one preset's shape.
fn exercise(preset: Preset, min_bits: f64) {
    let s = Setup::new(preset, 40 + preset as u64);
    let slots = s.context.params().slots();
    let eval = s.evaluator(&KeySetRequest::full(slots));
    let mut rng = seeded_rng(1000 + preset as u64);
    let (x, y) = (unit_disk(&mut rng, slots), unit_disk(&mut rng, slots));
    let (cx, cy) = (s.encrypt(&x), s.encrypt(&y));
    let enc = s.context.params().enc_level();
    let check = |name: &str, ct: &Ciphertext, expected: &[Complex64]| {
        let got = bits(max_abs_error(&s.decrypt(ct), expected));
        eprintln!("{preset} {name}: level {} {got:.2} bits", ct.level());
        assert!(got >= min_bits, "{preset} {name}: {got:.2} < {min_bits}");
    };
    let prod = eval.mult(&cx, &cy).unwrap();
    assert_eq!(prod.level().get(), enc.get() - 1);
    assert_eq!(
        prod.scale(),
        s.context
            .params()
            .default_scale(Level(enc.get() - 1))
            .unwrap()
    );
    let xy: Vec<Complex64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    check("mult", &prod, &xy);
    check(
        "square",
        &eval.square(&cx).unwrap(),
        &x.iter().map(|a| a * a).collect::<Vec<_>>(),
    );
    let c = Complex64::new(0.625, -0.375);
    check(
        "mult_const",
        &eval.mult_const(&cx, c).unwrap(),
        &x.iter().map(|a| a * c).collect::<Vec<_>>(),
    );
    check(
        "mult_integer",
        &eval.mult_integer(&cx, -3).unwrap(),
        &x.iter().map(|a| a * -3.0).collect::<Vec<_>>(),
    );
    check(
        "mult_by_i",
        &eval.mult_by_i(&cx).unwrap(),
        &x.iter().map(|a| a * Complex64::i()).collect::<Vec<_>>(),
    );
    let py = s.encoder.encode(&y).unwrap();
    check("mult_plain", &eval.mult_plain(&cx, &py).unwrap(), &xy);
    check(
        "conjugate",
        &eval.conjugate(&cx).unwrap(),
        &x.iter().map(|a| a.conj()).collect::<Vec<_>>(),
    );
    for steps in [1i64, -1, 5, slots as i64 / 2 + 3, -(slots as i64) + 7] {
        check(
            &format!("rotate {steps}"),
            &eval.rotate(&cx, steps).unwrap(),
            &rotate_left(&x, steps),
        );
    }
    let hoisted = eval.rotate_hoisted(&cx, &[1, 2, 4, -8]).unwrap();
    for (ct, k) in hoisted.iter().zip([1i64, 2, 4, -8]) {
        check(&format!("hoisted {k}"), ct, &rotate_left(&x, k));
    }
    // A sum of products: mult_without_rescale, add, rescale.
    let t = eval.mult_without_rescale(&cx, &cy).unwrap();
    let t = eval
        .add(&t, &eval.mult_without_rescale(&cx, &cx).unwrap())
        .unwrap();
    let t = eval.rescale(&t).unwrap();
    check(
        "mult+add+rescale",
        &t,
        &x.iter()
            .zip(&y)
            .map(|(a, b)| a * b + a * a)
            .collect::<Vec<_>>(),
    );
}

#[test]
fn every_operation_on_every_test_preset() {
    for preset in Preset::TEST {
        // FT presets keep a 28–36-bit scale: fewer bits survive.
        let min = match preset.shape_of() {
            Preset::FTa => 9.0,
            Preset::FTb => 15.0,
            _ => 20.0,
        };
        exercise(preset, min);
    }
}

#[test]
fn key_switching_from_one_secret_to_another() {
    let s = Setup::new(Preset::TestFGb, 7);
    let other = s.keygen.secret_key().unwrap();
    let key = s.keygen.switching_key(&other, &s.secret).unwrap();
    // Encrypt under `other`, switch to `s.secret`, decrypt under `s.secret`.
    let mut rng = seeded_rng(7);
    let x = unit_disk(&mut rng, s.context.params().slots());
    let ct = s
        .encryptor
        .encrypt_symmetric(&s.encoder.encode(&x).unwrap(), &other)
        .unwrap();
    let mut keys = KeySet::new();
    assert!(
        keys.insert(key).is_err(),
        "generic keys do not go in a key set"
    );
    let key = s.keygen.switching_key(&other, &s.secret).unwrap();
    let switched = Evaluator::new(&s.context).switch_key(&ct, &key).unwrap();
    let got = bits(max_abs_error(&s.decrypt(&switched), &x));
    assert!(got > 25.0, "{got}");
    // Decrypting the switched ciphertext under the old key fails to recover x.
    let wrong = s
        .encoder
        .decode(&s.decryptor.decrypt(&switched, &other).unwrap())
        .unwrap();
    assert!(max_abs_error(&wrong, &x) > 1.0);
}

#[test]
fn rotations_by_every_key_of_a_power_of_two_set() {
    let s = Setup::new(Preset::TestFGb, 8);
    let slots = s.context.params().slots();
    let eval = s.evaluator(&KeySetRequest::full(slots));
    let x = unit_disk(&mut seeded_rng(8), slots);
    let cx = s.encrypt(&x);
    for &g in &eval.keys().unwrap().rotation_elements() {
        // Find the rotation amount of this key.
        let n = s.context.params().degree().get();
        let k = (0..slots as i64)
            .find(|&k| {
                hemem_ckks::ntt::GaloisElement::rotation(k, n) == g
                    || hemem_ckks::ntt::GaloisElement::rotation(k - slots as i64, n) == g
            })
            .unwrap();
        let got = bits(max_abs_error(
            &s.decrypt(&eval.rotate(&cx, k).unwrap()),
            &rotate_left(&x, k),
        ));
        assert!(got > 20.0, "rotation {k}: {got}");
    }
    let sum = eval.rotate_sum(&cx).unwrap();
    let total: Complex64 = x.iter().sum();
    let got = s.decrypt(&sum);
    assert!(got.iter().all(|v| (v - total).norm() < 1e-4));
}

/// Keys are made compressed (the seed stands for the uniform halves);
/// expanded, they switch to the very same limbs.
#[test]
fn compressed_keys_give_identical_results() {
    let s = Setup::new(Preset::TestFTb, 9);
    let slots = s.context.params().slots();
    let keys = s
        .keygen
        .key_set(
            &s.secret,
            &KeySetRequest {
                relinearization: true,
                conjugation: false,
                rotations: vec![3],
                ..Default::default()
            },
        )
        .unwrap();
    let compressed = keys.size_bytes();
    let x = unit_disk(&mut seeded_rng(9), slots);
    let cx = s.encrypt(&x);
    let keys = Arc::new(keys);
    let eval = Evaluator::with_keys(&s.context, Arc::clone(&keys));
    let a = eval.mult(&cx, &cx).unwrap();
    let r = eval.rotate(&cx, 3).unwrap();
    drop(eval);
    let mut expanded = Arc::try_unwrap(keys).unwrap();
    for k in expanded.keys_mut() {
        assert!(k.is_compressed());
        k.expand().unwrap();
        assert!(!k.is_compressed());
    }
    assert_eq!(expanded.size_bytes(), compressed * 2);
    let eval = Evaluator::with_keys(&s.context, Arc::new(expanded));
    let b = eval.mult(&cx, &cx).unwrap();
    let r2 = eval.rotate(&cx, 3).unwrap();
    let words = |ct: &Ciphertext| {
        (
            ct.parts().0.to_words().unwrap(),
            ct.parts().1.to_words().unwrap(),
        )
    };
    assert_eq!(words(&a), words(&b));
    assert_eq!(words(&r), words(&r2));
}

/// A compressed key (its `a_j` generated inside the inner product from the
/// seed), the stored key and the compressed key expanded again give
/// bit-identical key switches: relinearisation, single and hoisted rotations
/// (the Galois inner product), at the top level and one level down.
#[test]
fn seeded_key_switch_equals_the_expanded_key() {
    let s = Setup::new(Preset::TestFGb, 21);
    let slots = s.context.params().slots();
    let request = KeySetRequest {
        relinearization: true,
        conjugation: true,
        rotations: vec![1, 5],
        ..Default::default()
    };
    // Three generators from one seed give the same keys (made compressed).
    let keys = || {
        KeyGenerator::with_seed(&s.context, seed32(22))
            .key_set(&s.secret, &request)
            .unwrap()
    };
    let mut stored = keys();
    for k in stored.keys_mut() {
        assert!(k.is_compressed());
        k.expand().unwrap();
        assert!(!k.is_compressed());
    }
    let stored = Arc::new(stored);
    let compressed = keys();
    let mut expanded = keys();
    for k in expanded.keys_mut() {
        k.expand().unwrap();
        k.compress();
        k.expand().unwrap();
    }
    let x = unit_disk(&mut seeded_rng(21), slots);
    let top = s.encrypt(&x);
    let words = |ct: &Ciphertext| {
        (
            ct.parts().0.to_words().unwrap(),
            ct.parts().1.to_words().unwrap(),
        )
    };
    let run = |keys: Arc<KeySet>| {
        let eval = Evaluator::with_keys(&s.context, keys);
        let product = eval.mult(&top, &top).unwrap();
        let lower = eval
            .level_down(&product, Level(product.level().0 - 1))
            .unwrap();
        let mut out = Vec::new();
        for ct in [&top, &lower] {
            out.push(words(&eval.mult(ct, ct).unwrap()));
            out.push(words(&eval.rotate(ct, 5).unwrap()));
            out.push(words(&eval.conjugate(ct).unwrap()));
            for r in eval.rotate_hoisted(ct, &[1, 5]).unwrap() {
                out.push(words(&r));
            }
        }
        out
    };
    let reference = run(stored);
    assert_eq!(reference, run(Arc::new(compressed)), "compressed keys");
    assert_eq!(reference, run(Arc::new(expanded)), "re-expanded keys");
}

#[test]
fn fgb_structure_chain_down_to_level_3() {
    let s = Setup::new(Preset::TestFGb, 11);
    let slots = s.context.params().slots();
    let eval = s.evaluator(&KeySetRequest {
        relinearization: true,
        ..Default::default()
    });
    let x = unit_disk(&mut seeded_rng(11), slots);
    let mut ct = s.encrypt(&x);
    let mut expected = x.clone();
    while ct.level().get() > 3 {
        ct = eval.mult(&ct, &ct).unwrap();
        expected = expected.iter().map(|v| v * v).collect();
        let got = bits(max_abs_error(&s.decrypt(&ct), &expected));
        eprintln!("chain level {}: {got:.2} bits", ct.level());
    }
    assert_eq!(ct.level(), Level(3));
    let got = bits(max_abs_error(&s.decrypt(&ct), &expected));
    assert!(got > 15.0, "{got}");
}

#[test]
fn bad_operations_are_typed_errors() {
    let s = Setup::new(Preset::TestFGa, 12);
    let slots = s.context.params().slots();
    let x = unit_disk(&mut seeded_rng(12), slots);
    let cx = s.encrypt(&x);
    let no_keys = Evaluator::new(&s.context);
    let e = |r: hemem_ckks::Result<Ciphertext>| r.map(|_| ()).unwrap_err();
    assert!(matches!(
        e(no_keys.mult(&cx, &cx)),
        Error::Key(KeyError::NoKeys)
    ));
    let eval = s.evaluator(&KeySetRequest {
        relinearization: false,
        conjugation: false,
        rotations: vec![1],
        ..Default::default()
    });
    assert!(matches!(
        e(eval.mult(&cx, &cx)),
        Error::Key(KeyError::MissingRelinearizationKey)
    ));
    assert!(matches!(
        e(eval.conjugate(&cx)),
        Error::Key(KeyError::MissingConjugationKey)
    ));
    assert!(matches!(
        e(eval.rotate(&cx, 2)),
        Error::Key(KeyError::MissingRotationKey { step: 2 })
    ));
    assert!(matches!(
        e(eval.rotate_hoisted(&cx, &[3]).map(|mut v| v.remove(0))),
        Error::Key(KeyError::MissingRotationKey { step: 3 })
    ));
    // Level 0: neither mult nor rescale.
    let eval = s.evaluator(&KeySetRequest {
        relinearization: true,
        ..Default::default()
    });
    let low = Evaluator::new(&s.context)
        .level_down(&cx, Level(0))
        .unwrap();
    assert!(matches!(
        e(eval.mult(&low, &low)),
        Error::Operand(OperandError::LevelTooLow { .. })
    ));
    assert!(matches!(
        e(eval.rescale(&low)),
        Error::Operand(OperandError::LevelTooLow { .. })
    ));
    // FGa: the 48-bit scale cannot be rescaled below level 3.
    let at3 = Evaluator::new(&s.context)
        .level_down(&cx, Level(4))
        .unwrap();
    let at3 = eval.mult(&at3, &at3).unwrap();
    assert_eq!(at3.level(), Level(3));
    assert!(matches!(
        e(eval.mult(&at3, &at3)),
        Error::Operand(OperandError::ScaleOverflow { .. })
    ));
    // Mismatched levels in a product.
    let other = Evaluator::new(&s.context)
        .level_down(&cx, Level(5))
        .unwrap();
    assert!(matches!(
        e(eval.mult(&cx, &other)),
        Error::Operand(OperandError::LevelMismatch { .. })
    ));
}

#[test]
fn flooded_decryption_costs_the_predicted_precision() {
    use hemem_ckks::eval::{FloodingGoal, NoiseFlooding};
    let s = Setup::new(Preset::TestFGb, 13);
    let slots = s.context.params().slots();
    let x = unit_disk(&mut seeded_rng(13), slots);
    let ct = s.encrypt(&x);
    let plain = bits(max_abs_error(&s.decrypt(&ct), &x));
    let flooding = NoiseFlooding {
        precision_bits: 28.0,
        ..NoiseFlooding::default()
    };
    let flooded = s
        .encoder
        .decode(
            &s.decryptor
                .decrypt_flooded(&ct, &s.secret, &flooding)
                .unwrap(),
        )
        .unwrap();
    let got = bits(max_abs_error(&flooded, &x));
    // σ = Δ·2^-28 per coefficient becomes about 2^-28·√N per slot (RMS).
    let log_sqrt_n = 0.5 * (s.context.params().degree().get() as f64).log2();
    eprintln!(
        "plain {plain:.2} bits, flooded {got:.2} bits (predicted ≈ {:.2})",
        28.0 - log_sqrt_n - 2.0
    );
    assert!(got < plain - 2.0, "flooding must add noise");
    assert!(
        got > 28.0 - log_sqrt_n - 5.0 && got < 28.0 - log_sqrt_n + 1.0,
        "{got}"
    );
    // 128-bit indistinguishability needs more noise than the scale holds.
    let strict = NoiseFlooding {
        goal: FloodingGoal::Indistinguishability {
            statistical_bits: 128,
        },
        ..NoiseFlooding::default()
    };
    assert!(matches!(
        s.decryptor
            .decrypt_flooded(&ct, &s.secret, &strict)
            .map(|_| ()),
        Err(Error::Operand(OperandError::FloodingTooWide { .. }))
    ));
    // Requests that would flood nothing: widths of zero, below one
    // coefficient unit, negative or NaN; a precision beyond the scale's
    // bits (a flood far below the rounding), zero, negative or NaN.
    let scale_bits = ct.scale().get().log2();
    let widths = [0.0, 0.5, -1.0, f64::NAN, f64::INFINITY];
    let claims = [scale_bits + 1.0, 1000.0, 0.0, -3.0, f64::NAN];
    let requests = widths
        .iter()
        .map(|&w| NoiseFlooding {
            sigma: Some(w),
            ..NoiseFlooding::default()
        })
        .chain(claims.iter().map(|&b| NoiseFlooding {
            precision_bits: b,
            ..NoiseFlooding::default()
        }));
    for request in requests {
        assert!(
            matches!(
                s.decryptor
                    .decrypt_flooded(&ct, &s.secret, &request)
                    .map(|_| ()),
                Err(Error::Operand(OperandError::InvalidFlooding { .. }))
            ),
            "{request:?}"
        );
    }
    // An explicit width of 2^10 units is taken as given.
    let explicit = NoiseFlooding {
        sigma: Some(1024.0),
        ..NoiseFlooding::default()
    };
    assert!(
        s.decryptor
            .decrypt_flooded(&ct, &s.secret, &explicit)
            .is_ok()
    );
}

#[test]
fn mod_raise_adds_multiples_of_q0_only() {
    let s = Setup::new(Preset::TestFGb, 14);
    let slots = s.context.params().slots();
    let plain = Evaluator::new(&s.context);
    let x = unit_disk(&mut seeded_rng(14), slots);
    let ct = plain.level_down(&s.encrypt(&x), Level(0)).unwrap();
    let top = s.context.params().max_level();
    let raised = plain.mod_raise(&ct, top).unwrap();
    assert_eq!(raised.level(), top);
    assert_eq!(raised.scale(), ct.scale());
    // Back at level 0 the limbs are exactly the input's.
    let back = plain.level_down(&raised, Level(0)).unwrap();
    assert_eq!(
        back.parts().0.to_words().unwrap(),
        ct.parts().0.to_words().unwrap()
    );
    assert_eq!(
        back.parts().1.to_words().unwrap(),
        ct.parts().1.to_words().unwrap()
    );
    // Decrypted at the top, each coefficient is the level-0 one plus q0·I
    // with a small integer I (|I| ≤ (h+1)/2 + 1 by construction).
    let scale = ct.scale().get();
    let q0 = s.context.params().q_moduli()[0].value() as f64;
    let low = s
        .encoder
        .coefficients(&s.decryptor.decrypt(&ct, &s.secret).unwrap())
        .unwrap();
    let high = s
        .encoder
        .coefficients(&s.decryptor.decrypt(&raised, &s.secret).unwrap())
        .unwrap();
    let bound = (s.context.params().hamming_weight() as f64 + 1.0) / 2.0 + 1.0;
    let mut max_i = 0f64;
    for (l, h) in low.iter().zip(&high) {
        let i = (h - l) * scale / q0;
        assert!((i - i.round()).abs() < 1e-3, "{i}");
        max_i = max_i.max(i.abs());
    }
    assert!(max_i >= 1.0 && max_i <= bound, "max |I| = {max_i}");
    assert!(matches!(
        plain.mod_raise(&raised, top).map(|_| ()),
        Err(Error::Operand(OperandError::LevelOutOfRange { .. }))
    ));
}

/// Level-aware keys: a rotation key and a relinearisation key made for level
/// `m` give the very limbs the top-level keys give at every level up to `m`
/// (same randomness), decrypt to the f64 reference, and are refused above
/// `m` with a typed error.
#[test]
fn level_aware_keys_switch_like_full_keys_up_to_their_level() {
    let s = Setup::new(Preset::TestFGb, 70);
    let params = s.context.params().clone();
    let n = params.degree().get();
    let m = Level(5);
    let step = 3;
    let g = GaloisElement::rotation(step, n);
    // One key per set, generated first by a generator in the same state as
    // `s.keygen`: the same secret and the same key randomness.
    let evaluator = |kind: KeyKind, level: Option<Level>| {
        let request = KeySetRequest {
            relinearization: kind == KeyKind::Relinearization,
            rotations: if kind == KeyKind::Rotation(g) {
                vec![step]
            } else {
                vec![]
            },
            levels: level.map(|l| [(kind, l)].into()).unwrap_or_default(),
            ..Default::default()
        };
        let keygen = KeyGenerator::with_seed(&s.context, seed32(70));
        let secret = keygen.secret_key().unwrap();
        let _public = keygen.public_key(&secret).unwrap();
        let keys = keygen.key_set(&secret, &request).unwrap();
        let key = keys.keys().next().unwrap();
        assert_eq!(key.level(), level.unwrap_or(params.max_level()));
        let bytes = keys.size_bytes();
        (Evaluator::with_keys(&s.context, Arc::new(keys)), bytes)
    };
    let words = |ct: &Ciphertext| {
        (
            ct.parts().0.to_words().unwrap(),
            ct.parts().1.to_words().unwrap(),
        )
    };
    let mut rng = seeded_rng(71);
    let x = unit_disk(&mut rng, params.slots());
    let fresh = s.encrypt(&x);
    for kind in [KeyKind::Rotation(g), KeyKind::Relinearization] {
        let (full, full_bytes) = evaluator(kind, None);
        let (low, low_bytes) = evaluator(kind, Some(m));
        assert!(low_bytes * 2 < full_bytes, "{low_bytes} vs {full_bytes}");
        let op = |eval: &Evaluator, ct: &Ciphertext| match kind {
            KeyKind::Relinearization => eval.mult(ct, ct),
            _ => eval.rotate(ct, step),
        };
        for level in [m, Level(3), Level(1)] {
            let ct = full.level_down(&fresh, level).unwrap();
            let a = op(&full, &ct).unwrap();
            let b = op(&low, &ct).unwrap();
            assert!(words(&a) == words(&b), "{kind:?} at {level:?}");
            let expected: Vec<Complex64> = match kind {
                KeyKind::Relinearization => x.iter().map(|v| v * v).collect(),
                _ => rotate_left(&x, step),
            };
            let err = max_abs_error(&s.decrypt(&b), &expected);
            assert!(
                bits(err) > 12.0,
                "{kind:?} at {level:?}: {} bits",
                bits(err)
            );
        }
        let above = full.level_down(&fresh, Level(m.0 + 1)).unwrap();
        assert!(matches!(
            op(&low, &above),
            Err(Error::Key(KeyError::KeyLevelTooLow {
                needed: 6,
                level: 5,
                ..
            }))
        ));
    }
}

/// Double hoisting's operations (`ExtendedCiphertext`): baby-step rotations
/// kept in `Q_l ∪ P`, products by extended plaintexts (encoded or expanded
/// from compact ones) and a rotation there, then one ModDown: the same
/// message as the ordinary operations, with compressed and expanded keys.
#[test]
fn extended_basis_operations_decrypt_to_the_plain_results() {
    let s = Setup::new(Preset::TestFGb, 80);
    let params = s.context.params();
    let steps = [0i64, 1, 3, 8];
    let request = KeySetRequest {
        rotations: steps.to_vec(),
        ..Default::default()
    };
    let keys = Arc::new(s.keygen.key_set(&s.secret, &request).unwrap());
    let compressed = Evaluator::with_keys(&s.context, Arc::clone(&keys));
    let slots = params.slots();
    let mut rng = seeded_rng(81);
    let z = unit_disk(&mut rng, slots);
    let level = Level(5);
    let ct = compressed.level_down(&s.encrypt(&z), level).unwrap();
    let diag_scale = Scale(2f64.powi(30));
    let diagonals: Vec<Vec<Complex64>> = steps.iter().map(|_| unit_disk(&mut rng, slots)).collect();
    let mut expected = vec![Complex64::new(0.0, 0.0); slots];
    for (&k, d) in steps.iter().zip(&diagonals) {
        let r = rotate_left(&z, k);
        for ((e, a), b) in expected.iter_mut().zip(d).zip(&r) {
            *e += a * b;
        }
    }
    let mut outputs = Vec::new();
    let run = |eval: &Evaluator, outputs: &mut Vec<_>| {
        let ext = eval.rotate_hoisted_extended(&ct, &steps).unwrap();
        assert!(ext.iter().all(|e| e.level() == level && e.slots() == slots));
        let compact: Vec<CompactPlaintext> = diagonals
            .iter()
            .map(|d| {
                s.encoder
                    .encode_compact_at_class(d, level, diag_scale, slots, MemoryClass::Temporary)
                    .unwrap()
            })
            .collect();
        let from_compact = s
            .encoder
            .expand_extended(&compact.iter().collect::<Vec<_>>(), MemoryClass::Temporary)
            .unwrap();
        let mut sums = Vec::new();
        for plains in [
            from_compact,
            diagonals
                .iter()
                .map(|d| {
                    s.encoder
                        .encode_extended_at_class(
                            d,
                            level,
                            diag_scale,
                            slots,
                            MemoryClass::Temporary,
                        )
                        .unwrap()
                })
                .collect(),
        ] {
            assert!(plains.iter().all(Plaintext::is_extended));
            let mut acc = eval.mult_plain_extended(&ext[0], &plains[0]).unwrap();
            for (x, p) in ext.iter().zip(&plains).skip(1) {
                eval.mult_plain_extended_add_assign(&mut acc, x, p).unwrap();
            }
            sums.push(acc);
        }
        let words = |ct: &Ciphertext| {
            (
                ct.parts().0.to_words().unwrap(),
                ct.parts().1.to_words().unwrap(),
            )
        };
        let a = eval.mod_down_extended(&sums[0]).unwrap();
        let b = eval.mod_down_extended(&sums[1]).unwrap();
        assert!(
            words(&a) == words(&b),
            "compact and encoded diagonals agree"
        );
        let err = max_abs_error(&s.decrypt(&a), &expected);
        assert!(bits(err) > 20.0, "inner sum: {} bits", bits(err));
        let mut twice = eval.rotate_extended(&sums[0], 8).unwrap();
        eval.add_extended_assign(&mut twice, &sums[1]).unwrap();
        let got = s.decrypt(&eval.mod_down_extended(&twice).unwrap());
        let want: Vec<Complex64> = rotate_left(&expected, 8)
            .iter()
            .zip(&expected)
            .map(|(a, b)| a + b)
            .collect();
        let err = max_abs_error(&got, &want);
        assert!(bits(err) > 20.0, "rotated: {} bits", bits(err));
        outputs.push(words(&a));
        // Plaintexts over Q_l only are refused, and a missing key is typed.
        let short = s.encoder.encode_at(&z, level, diag_scale, slots).unwrap();
        assert!(!short.is_extended());
        assert!(eval.mult_plain_extended(&ext[0], &short).is_err());
        assert!(matches!(
            eval.rotate_extended(&sums[0], 5),
            Err(Error::Key(KeyError::MissingRotationKey { step: 5 }))
        ));
    };
    run(&compressed, &mut outputs);
    drop(compressed);
    let mut expanded = Arc::try_unwrap(keys).unwrap();
    for k in expanded.keys_mut() {
        k.expand().unwrap();
    }
    run(
        &Evaluator::with_keys(&s.context, Arc::new(expanded)),
        &mut outputs,
    );
    assert!(
        outputs[0] == outputs[1],
        "compressed and expanded keys agree"
    );
}

/// `mult_values`, `mult_real_values`, `add_values` and `add_real_values`
/// against f64, on full and sparse slots, on default-scale inputs and on
/// one whose scale is not its level's default: products land on the next
/// level's default scale, sums keep the level and scale.
#[test]
fn plaintext_values_land_on_default_scales() {
    let s = Setup::new(Preset::TestFGb, 13);
    let params = s.context.params().clone();
    let eval = Evaluator::new(&s.context);
    let mut rng = seeded_rng(13);
    let enc = params.enc_level();
    let check = |name: &str, ct: &Ciphertext, expected: &[Complex64]| {
        let got = s.decrypt(ct);
        let error = max_abs_error(&got[..expected.len()], expected);
        eprintln!("{name}: level {} {:.2} bits", ct.level(), bits(error));
        assert!(error > 0.0, "{name}: exact");
        approx::assert_abs_diff_eq!(error, 0.0, epsilon = 2f64.powi(-22));
    };
    for slots in [params.slots(), 16] {
        let x = unit_disk(&mut rng, slots);
        let w = unit_disk(&mut rng, slots);
        let r = hemem_ckks::testing::unit_interval(&mut rng, slots);
        let plain = s
            .encoder
            .encode_at(&x, enc, params.default_scale(enc).unwrap(), slots)
            .unwrap();
        let cx = s.encryptor.encrypt(&plain, &s.public).unwrap();
        assert_eq!(cx.slots(), slots);

        let xw: Vec<Complex64> = x.iter().zip(&w).map(|(a, b)| a * b).collect();
        let prod = eval.mult_values(&cx, &w).unwrap();
        assert_eq!(prod.level(), Level(enc.get() - 1));
        assert_eq!(prod.scale(), params.default_scale(prod.level()).unwrap());
        check("mult_values", &prod, &xw);

        let xr: Vec<Complex64> = x.iter().zip(&r).map(|(a, &b)| a * b).collect();
        let prod = eval.mult_real_values(&cx, &r).unwrap();
        assert_eq!(prod.scale(), params.default_scale(prod.level()).unwrap());
        check("mult_real_values", &prod, &xr);

        // Fewer values than slots: the rest are zeros.
        let half = &w[..slots / 2];
        let mut expected: Vec<Complex64> = x.iter().zip(half).map(|(a, b)| a * b).collect();
        expected.resize(slots, Complex64::new(0.0, 0.0));
        let got = s.decrypt(&eval.mult_values(&cx, half).unwrap());
        let error = max_abs_error(&got[..slots], &expected);
        assert!(error < 2f64.powi(-22), "padded: {error:e}");

        // A scale that is not the level's default (level_down keeps Δ_enc):
        // the product still lands on the next level's default.
        let low = eval.level_down(&cx, Level(enc.get() - 2)).unwrap();
        assert_ne!(low.scale(), params.default_scale(low.level()).unwrap());
        let prod = eval.mult_values(&low, &w).unwrap();
        assert_eq!(prod.level(), Level(enc.get() - 3));
        assert_eq!(prod.scale(), params.default_scale(prod.level()).unwrap());
        check("mult_values (scale off default)", &prod, &xw);

        let sum = eval.add_values(&prod, &w).unwrap();
        assert_eq!((sum.level(), sum.scale()), (prod.level(), prod.scale()));
        let expected: Vec<Complex64> = xw.iter().zip(&w).map(|(a, b)| a + b).collect();
        check("add_values", &sum, &expected);
        let sum = eval.add_real_values(&cx, &r).unwrap();
        assert_eq!((sum.level(), sum.scale()), (cx.level(), cx.scale()));
        let expected: Vec<Complex64> = x.iter().zip(&r).map(|(a, &b)| a + b).collect();
        check("add_real_values", &sum, &expected);
    }
}

#[test]
fn plaintext_values_errors_are_typed() {
    let s = Setup::new(Preset::TestFGb, 14);
    let slots = s.context.params().slots();
    let eval = Evaluator::new(&s.context);
    let x = unit_disk(&mut seeded_rng(14), slots);
    let cx = s.encrypt(&x);
    let e = |r: hemem_ckks::Result<Ciphertext>| r.map(|_| ()).unwrap_err();
    let low = eval.level_down(&cx, Level(0)).unwrap();
    assert!(matches!(
        e(eval.mult_values(&low, &x)),
        Error::Operand(OperandError::LevelTooLow { .. })
    ));
    let too_many = vec![Complex64::new(0.5, 0.0); slots + 1];
    assert!(matches!(
        e(eval.mult_values(&cx, &too_many)),
        Error::Operand(OperandError::TooManyValues { .. })
    ));
    assert!(matches!(
        e(eval.add_values(&cx, &too_many)),
        Error::Operand(OperandError::TooManyValues { .. })
    ));
    assert!(matches!(
        e(eval.mult_real_values(&cx, &[0.5, f64::NAN])),
        Error::Operand(OperandError::NonFiniteValue)
    ));
    assert!(matches!(
        e(eval.add_real_values(&cx, &[f64::INFINITY])),
        Error::Operand(OperandError::NonFiniteValue)
    ));
    let other = Setup::new(Preset::TestFGb, 15);
    assert!(matches!(
        e(Evaluator::new(&other.context).mult_values(&cx, &x)),
        Error::Operand(OperandError::ContextMismatch)
    ));
}

/// `mult_plain_sum` (a linear transform's inner sum in one pass) gives the
/// limbs of one product and a `mult_plain_add_assign` per further term, and
/// decrypts to the f64 sum of products; bad terms are typed errors.
#[test]
fn a_sum_of_plaintext_products_equals_the_products_one_by_one() {
    let s = Setup::new(Preset::TestFGb, 91);
    let eval = s.evaluator(&KeySetRequest::default());
    let slots = s.context.params().slots();
    let mut rng = seeded_rng(92);
    let values: Vec<Vec<Complex64>> = (0..3).map(|_| unit_disk(&mut rng, slots)).collect();
    let cts: Vec<Ciphertext> = values.iter().map(|v| s.encrypt(v)).collect();
    let level = cts[0].level();
    let weights: Vec<Vec<Complex64>> = (0..11).map(|_| unit_disk(&mut rng, slots)).collect();
    let scale = Scale(2f64.powi(30));
    let plains: Vec<Plaintext> = weights
        .iter()
        .map(|w| s.encoder.encode_at(w, level, scale, slots).unwrap())
        .collect();
    let terms: Vec<(&Ciphertext, &Plaintext)> = plains
        .iter()
        .enumerate()
        .map(|(t, p)| (&cts[t % 3], p))
        .collect();
    let words = |ct: &Ciphertext| {
        let (c0, c1) = ct.parts();
        (c0.to_words().unwrap(), c1.to_words().unwrap())
    };

    let mut one_by_one = eval
        .mult_plain_without_rescale(terms[0].0, terms[0].1)
        .unwrap();
    for &(a, p) in &terms[1..9] {
        eval.mult_plain_add_assign(&mut one_by_one, a, p).unwrap();
    }
    let mut sum = eval.mult_plain_sum(&terms[..9]).unwrap();
    assert_eq!(words(&sum), words(&one_by_one), "nine products");
    for &(a, p) in &terms[9..] {
        eval.mult_plain_add_assign(&mut one_by_one, a, p).unwrap();
    }
    eval.mult_plain_sum_add_assign(&mut sum, &terms[9..])
        .unwrap();
    assert_eq!(words(&sum), words(&one_by_one), "two more added in");
    assert_eq!(sum.level(), level);

    let want: Vec<Complex64> = (0..slots)
        .map(|j| (0..11).map(|t| weights[t][j] * values[t % 3][j]).sum())
        .collect();
    let got = s.decrypt(&eval.rescale(&sum).unwrap());
    let precision = bits(max_abs_error(&got, &want));
    assert!(precision > 12.0, "{precision:.1} bits");

    // No terms; products at different scales; an accumulator at another scale.
    assert!(matches!(
        eval.mult_plain_sum(&[]),
        Err(Error::LengthMismatch { .. })
    ));
    let other = s
        .encoder
        .encode_at(&weights[0], level, Scale(2f64.powi(31)), slots)
        .unwrap();
    assert!(matches!(
        eval.mult_plain_sum(&[terms[0], (&cts[1], &other)]),
        Err(Error::Operand(OperandError::ScaleMismatch { .. }))
    ));
    let mut wrong = eval.mult_plain_without_rescale(&cts[0], &other).unwrap();
    assert!(matches!(
        eval.mult_plain_sum_add_assign(&mut wrong, &terms[..2]),
        Err(Error::Operand(OperandError::ScaleMismatch { .. }))
    ));
}

/// A message whose slots repeat, encoded as one period and read as the
/// full slot count (`repeat_slots`), multiplies a full-slot ciphertext as
/// the repeated values do; encoded and compact forms expand to the same
/// limbs; and slot counts that cannot hold the period are refused.
#[test]
fn a_repeated_period_multiplies_like_the_full_message() {
    let s = Setup::new(Preset::TestFGb, 93);
    let eval = s.evaluator(&KeySetRequest::default());
    let slots = s.context.params().slots();
    let mut rng = seeded_rng(94);
    let values = unit_disk(&mut rng, slots);
    let ct = s.encrypt(&values);
    let level = ct.level();
    let scale = Scale(2f64.powi(30));
    let class = MemoryClass::BootstrapConstant;
    for period in [1usize, 4, slots / 8, slots] {
        let one = unit_disk(&mut rng, period);
        let full: Vec<Complex64> = one.iter().cycle().take(slots).copied().collect();
        assert_eq!(hemem_ckks::encoding::least_period(&full), period.max(1));
        let plain = s
            .encoder
            .encode_at_class(&one, level, scale, period, class)
            .unwrap()
            .repeat_slots(slots)
            .unwrap();
        let compact = s
            .encoder
            .encode_compact_at_class(&one, level, scale, period, class)
            .unwrap()
            .repeat_slots(slots)
            .unwrap();
        assert_eq!((plain.slots(), compact.slots()), (slots, slots));
        assert_eq!(
            (compact.period(), compact.size_bytes()),
            (period, 16 * period)
        );
        let expanded = compact.expand().unwrap();
        assert_eq!(expanded.slots(), slots);
        assert_eq!(
            expanded.poly().unwrap().to_words().unwrap(),
            plain.poly().unwrap().to_words().unwrap(),
            "period {period}"
        );
        let product = eval.mult_plain_without_rescale(&ct, &plain).unwrap();
        let got = s.decrypt(&eval.rescale(&product).unwrap());
        let want: Vec<Complex64> = values.iter().zip(&full).map(|(a, b)| a * b).collect();
        let precision = bits(max_abs_error(&got, &want));
        assert!(precision > 12.0, "period {period}: {precision:.1} bits");
    }
    // More slots than the context has, fewer than the period, or not a
    // power of two.
    let plain = |period: usize| {
        s.encoder
            .encode_at_class(
                &unit_disk(&mut seeded_rng(95), period),
                level,
                scale,
                period,
                class,
            )
            .unwrap()
    };
    for (period, asked) in [(4usize, 2 * slots), (8, 4), (4, 12), (4, 0)] {
        assert!(
            matches!(
                plain(period).repeat_slots(asked),
                Err(Error::Operand(OperandError::InvalidSlots { .. }))
            ),
            "{period} as {asked}"
        );
    }
}

fn words_of(ct: &Ciphertext) -> (Vec<u64>, Vec<u64>) {
    (
        ct.parts().0.to_words().unwrap(),
        ct.parts().1.to_words().unwrap(),
    )
}

/// A plaintext kept periodic (its limbs' distinct values only) multiplies
/// bit for bit like its full expansion: alone, in sums of more than one
/// launch's eight terms mixed with full plaintexts, accumulated, and over
/// `Q ∪ P`; it saves as the full plaintext, and every use that needs the
/// full form refuses it with a typed error.
#[test]
fn a_periodic_plaintext_multiplies_bit_for_bit_like_the_full_one() {
    let s = Setup::new(Preset::TestFGb, 96);
    let eval = s.evaluator(&KeySetRequest {
        rotations: vec![1],
        ..Default::default()
    });
    let n = s.context.params().degree().get();
    let slots = s.context.params().slots();
    let mut rng = seeded_rng(97);
    let cts: Vec<Ciphertext> = (0..3)
        .map(|_| s.encrypt(&unit_disk(&mut rng, slots)))
        .collect();
    let level = cts[0].level();
    let scale = Scale(2f64.powi(30));
    let class = MemoryClass::BootstrapConstant;
    let compact = |period: usize, rng: &mut _| {
        s.encoder
            .encode_compact_at_class(&unit_disk(rng, period), level, scale, period, class)
            .unwrap()
            .repeat_slots(slots)
            .unwrap()
    };
    let periods = [1usize, 2, 16, 64, slots / 4, slots];
    let compacts: Vec<CompactPlaintext> = periods.iter().map(|&p| compact(p, &mut rng)).collect();
    let refs: Vec<&CompactPlaintext> = compacts.iter().collect();
    let periodic = s.encoder.expand_periodic(&refs, class, false).unwrap();
    let full = s.encoder.expand(&refs, class).unwrap();
    let limbs = level.0 + 1;
    for ((p, f), &period) in periodic.iter().zip(&full).zip(&periods) {
        let short = hemem_ckks::encoding::is_short_period(n, period);
        assert_eq!(p.is_periodic(), short, "period {period}");
        let stored = if short { 2 * period } else { n };
        assert_eq!(p.size_bytes(), limbs * stored * 8, "period {period}");
        assert_eq!(p.moduli(), f.moduli());
        // Alone: the same limbs as the full plaintext's product.
        let want = eval.mult_plain_without_rescale(&cts[0], f).unwrap();
        let got = eval.mult_plain_without_rescale(&cts[0], p).unwrap();
        assert_eq!(words_of(&got), words_of(&want), "period {period}");
        assert_eq!(got.scale(), want.scale());
        // A copy, and a round trip through the host, stay periodic.
        let back = p.to_host().unwrap().to_device().unwrap();
        assert_eq!(back.is_periodic(), short);
        let again = eval.mult_plain_without_rescale(&cts[0], &back).unwrap();
        assert_eq!(words_of(&again), words_of(&want));
        // Saved in full: what loads is the full plaintext.
        let mut file = Vec::new();
        p.save(&mut file).unwrap();
        let loaded = Plaintext::load(&s.context, file.as_slice()).unwrap();
        assert!(!loaded.is_periodic());
        assert_eq!(
            loaded.poly().unwrap().to_words().unwrap(),
            f.poly().unwrap().to_words().unwrap()
        );
    }
    // Eleven terms (two launches of at most eight), periodic and full mixed,
    // and accumulated into a running sum.
    let terms = |plains: &[Plaintext]| -> Vec<(usize, usize)> {
        (0..11)
            .map(|t| (t % cts.len(), (3 * t + 1) % plains.len()))
            .collect()
    };
    let mixed: Vec<&Plaintext> = (0..periodic.len())
        .map(|i| if i % 2 == 0 { &periodic[i] } else { &full[i] })
        .collect();
    fn pick<'a>(
        cts: &'a [Ciphertext],
        plains: &[&'a Plaintext],
        terms: &[(usize, usize)],
    ) -> Vec<(&'a Ciphertext, &'a Plaintext)> {
        terms.iter().map(|&(c, p)| (&cts[c], plains[p])).collect()
    }
    let index = terms(&full);
    let full_refs: Vec<&Plaintext> = full.iter().collect();
    let want = eval
        .mult_plain_sum(&pick(&cts, &full_refs, &index))
        .unwrap();
    let got = eval.mult_plain_sum(&pick(&cts, &mixed, &index)).unwrap();
    assert_eq!(words_of(&got), words_of(&want));
    let mut want_acc = eval.mult_plain_without_rescale(&cts[1], &full[2]).unwrap();
    let mut got_acc = eval
        .mult_plain_without_rescale(&cts[1], &periodic[2])
        .unwrap();
    eval.mult_plain_sum_add_assign(&mut want_acc, &pick(&cts, &full_refs, &index))
        .unwrap();
    eval.mult_plain_sum_add_assign(&mut got_acc, &pick(&cts, &mixed, &index))
        .unwrap();
    assert_eq!(words_of(&got_acc), words_of(&want_acc));
    // And the sum decrypts to the f64 products' sum.
    let messages: Vec<Vec<Complex64>> = cts.iter().map(|c| s.decrypt(c)).collect();
    let plain_values: Vec<Vec<Complex64>> =
        full.iter().map(|f| s.encoder.decode(f).unwrap()).collect();
    let mut reference = vec![Complex64::new(0.0, 0.0); slots];
    for (c, p) in terms(&full) {
        for (r, (x, y)) in reference
            .iter_mut()
            .zip(messages[c].iter().zip(&plain_values[p]))
        {
            *r += x * y;
        }
    }
    let decrypted = s.decrypt(&eval.rescale(&got).unwrap());
    let precision = bits(max_abs_error(&decrypted, &reference));
    assert!(precision > 10.0, "{precision:.1} bits");

    // Over Q ∪ P (double hoisting's diagonals).
    let periodic_ext = s.encoder.expand_periodic(&refs, class, true).unwrap();
    let full_ext = s.encoder.expand_extended(&refs, class).unwrap();
    let ext = eval.rotate_hoisted_extended(&cts[2], &[1]).unwrap();
    for (p, f) in periodic_ext.iter().zip(&full_ext) {
        assert!(p.is_extended());
        let want = eval.mult_plain_extended(&ext[0], f).unwrap();
        let got = eval.mult_plain_extended(&ext[0], p).unwrap();
        assert_eq!(
            got.parts().0.to_words().unwrap(),
            want.parts().0.to_words().unwrap()
        );
        let mut want_acc = eval.mult_plain_extended(&ext[0], f).unwrap();
        let mut got_acc = eval.mult_plain_extended(&ext[0], f).unwrap();
        eval.mult_plain_extended_add_assign(&mut want_acc, &ext[0], f)
            .unwrap();
        eval.mult_plain_extended_add_assign(&mut got_acc, &ext[0], p)
            .unwrap();
        assert_eq!(
            got_acc.parts().1.to_words().unwrap(),
            want_acc.parts().1.to_words().unwrap()
        );
    }

    // What needs the full form refuses a periodic plaintext (at the
    // ciphertexts' scale, so that only its form is wrong).
    let at_scale = s
        .encoder
        .encode_compact_at_class(&unit_disk(&mut rng, 16), level, cts[0].scale(), 16, class)
        .unwrap()
        .repeat_slots(slots)
        .unwrap();
    let p = &s
        .encoder
        .expand_periodic(&[&at_scale], class, false)
        .unwrap()[0];
    assert!(p.is_periodic());
    let refused = |r: Result<(), Error>| {
        assert!(
            matches!(r, Err(Error::Operand(OperandError::PeriodicPlaintext))),
            "{r:?}"
        );
    };
    refused(p.poly().map(|_| ()));
    refused(eval.add_plain(&cts[0], p).map(|_| ()));
    refused(eval.sub_plain(&cts[0], p).map(|_| ()));
    refused(s.encryptor.encrypt(p, &s.public).map(|_| ()));
    refused(s.encoder.decode(p).map(|_| ()));
}

/// A sum of products relinearised once (lazy relinearisation) decrypts to
/// the f64 sum of products plus the addend, as precisely as the products
/// relinearised one by one; what it cannot sum is a typed error.
#[test]
fn a_sum_of_products_relinearised_once_decrypts_to_the_sum() {
    let s = Setup::new(Preset::TestFGb, 98);
    let eval = s.evaluator(&KeySetRequest {
        relinearization: true,
        ..Default::default()
    });
    let slots = s.context.params().slots();
    let mut rng = seeded_rng(99);
    let values: Vec<Vec<Complex64>> = (0..7).map(|_| unit_disk(&mut rng, slots)).collect();
    let cts: Vec<Ciphertext> = values.iter().map(|v| s.encrypt(v)).collect();
    let pairs: Vec<(&Ciphertext, &Ciphertext)> =
        vec![(&cts[0], &cts[1]), (&cts[2], &cts[3]), (&cts[4], &cts[4])];
    let addend = eval.mult_without_rescale(&cts[5], &cts[6]).unwrap();
    let lazy = eval
        .mult_sum_without_rescale(&pairs, Some(&addend))
        .unwrap();
    let mut eager = eval.mult_without_rescale(&cts[0], &cts[1]).unwrap();
    for (a, b) in &pairs[1..] {
        eager = eval
            .add(&eager, &eval.mult_without_rescale(a, b).unwrap())
            .unwrap();
    }
    let eager = eval.add(&eager, &addend).unwrap();
    assert_eq!((lazy.level(), lazy.scale()), (eager.level(), eager.scale()));
    let want: Vec<Complex64> = (0..slots)
        .map(|j| {
            values[0][j] * values[1][j]
                + values[2][j] * values[3][j]
                + values[4][j] * values[4][j]
                + values[5][j] * values[6][j]
        })
        .collect();
    let lazy_bits = bits(max_abs_error(
        &s.decrypt(&eval.rescale(&lazy).unwrap()),
        &want,
    ));
    let eager_bits = bits(max_abs_error(
        &s.decrypt(&eval.rescale(&eager).unwrap()),
        &want,
    ));
    assert!(lazy_bits > 12.0, "{lazy_bits:.1} bits");
    assert!(
        lazy_bits > eager_bits - 1.0,
        "{lazy_bits:.1} against {eager_bits:.1} bits"
    );
    // One product, no addend: the product relinearised.
    let one = eval
        .mult_sum_without_rescale(&[(&cts[0], &cts[1])], None)
        .unwrap();
    let single = eval.mult_without_rescale(&cts[0], &cts[1]).unwrap();
    assert_eq!(words_of(&one), words_of(&single));

    // Nothing to sum; products at two scales; an addend at another level;
    // no relinearisation key.
    assert!(matches!(
        eval.mult_sum_without_rescale(&[], None),
        Err(Error::LengthMismatch { .. })
    ));
    let doubled = eval
        .mult_const_without_rescale(&cts[2], Complex64::new(1.0, 0.0), Scale(2f64.powi(20)))
        .unwrap();
    let low = eval
        .level_down(&cts[3], Level(cts[3].level().0 - 1))
        .unwrap();
    let low_addend = eval.mult_without_rescale(&low, &low).unwrap();
    for result in [
        eval.mult_sum_without_rescale(&[(&cts[0], &cts[1]), (&doubled, &cts[3])], None),
        eval.mult_sum_without_rescale(&[(&cts[0], &cts[1])], Some(&low_addend)),
    ] {
        assert!(
            matches!(result, Err(Error::Operand(_))),
            "{:?}",
            result.map(|_| ())
        );
    }
    let keyless = Evaluator::new(&s.context);
    assert!(matches!(
        keyless.mult_sum_without_rescale(&pairs, None),
        Err(Error::Key(_))
    ));
}

/// Relinearisation and rescale in one ModDown (dividing by `P·q_l`)
/// decrypt to the f64 sum of products plus the addend, at the level and
/// scale of relinearising then rescaling and as precisely; `mult` is that
/// path; the scale rule, level 0, a mismatched addend and a missing key are
/// typed errors.
#[test]
fn relinearisation_and_rescale_in_one_mod_down_decrypt_to_the_sum() {
    let s = Setup::new(Preset::TestFGb, 101);
    let eval = s.evaluator(&KeySetRequest {
        relinearization: true,
        ..Default::default()
    });
    let params = s.context.params();
    let slots = params.slots();
    let mut rng = seeded_rng(102);
    let values: Vec<Vec<Complex64>> = (0..6).map(|_| unit_disk(&mut rng, slots)).collect();
    let cts: Vec<Ciphertext> = values.iter().map(|v| s.encrypt(v)).collect();
    let tensor = |a: &Ciphertext, b: &Ciphertext, c: &Ciphertext, d: &Ciphertext| {
        let mut t = eval.tensor(a, b).unwrap();
        eval.add_tensored_assign(&mut t, &eval.tensor(c, d).unwrap())
            .unwrap();
        t
    };
    let addend = eval.mult_without_rescale(&cts[4], &cts[5]).unwrap();
    let fused = eval
        .relinearize_rescale_with(tensor(&cts[0], &cts[1], &cts[2], &cts[3]), Some(&addend))
        .unwrap();
    let two_steps = eval
        .rescale(
            &eval
                .relinearize_with(tensor(&cts[0], &cts[1], &cts[2], &cts[3]), Some(&addend))
                .unwrap(),
        )
        .unwrap();
    assert_eq!(fused.level(), Level(cts[0].level().0 - 1));
    assert_eq!(
        (fused.level(), fused.scale()),
        (two_steps.level(), two_steps.scale())
    );
    let want: Vec<Complex64> = (0..slots)
        .map(|j| {
            values[0][j] * values[1][j] + values[2][j] * values[3][j] + values[4][j] * values[5][j]
        })
        .collect();
    let fused_bits = bits(max_abs_error(&s.decrypt(&fused), &want));
    let two_step_bits = bits(max_abs_error(&s.decrypt(&two_steps), &want));
    assert!(fused_bits > 12.0, "{fused_bits:.1} bits");
    assert!(
        fused_bits > two_step_bits - 1.0,
        "{fused_bits:.1} against {two_step_bits:.1} bits"
    );
    // The unchecked form: the same limbs where the rule allows the rescale.
    let unchecked = eval
        .relinearize_rescale_unchecked_with(
            tensor(&cts[0], &cts[1], &cts[2], &cts[3]),
            Some(&addend),
        )
        .unwrap();
    assert_eq!(words_of(&unchecked), words_of(&fused));
    assert_eq!(unchecked.scale(), fused.scale());

    // `mult` is the fused path.
    let product = eval.mult(&cts[0], &cts[1]).unwrap();
    let direct = eval
        .relinearize_rescale_with(eval.tensor(&cts[0], &cts[1]).unwrap(), None)
        .unwrap();
    assert_eq!(words_of(&product), words_of(&direct));
    let xy: Vec<Complex64> = (0..slots).map(|j| values[0][j] * values[1][j]).collect();
    let product_bits = bits(max_abs_error(&s.decrypt(&product), &xy));
    let unfused_bits = bits(max_abs_error(
        &s.decrypt(
            &eval
                .rescale(&eval.mult_without_rescale(&cts[0], &cts[1]).unwrap())
                .unwrap(),
        ),
        &xy,
    ));
    assert!(
        product_bits > unfused_bits - 1.0,
        "{product_bits:.1} against {unfused_bits:.1} bits"
    );

    // The scale rule: a product whose rescaled scale would pass 2·q_l is
    // refused by the checked form and labelled by the unchecked one.
    let level = cts[0].level();
    let q = params.q_modulus(level).unwrap().value() as f64;
    let factor = 8.0 * q * q / (cts[0].scale().get() * cts[1].scale().get());
    let big = eval
        .mult_const_without_rescale(&cts[0], Complex64::new(1.0, 0.0), Scale(factor))
        .unwrap();
    let big_tensor = || eval.tensor(&big, &cts[1]).unwrap();
    let t_scale = big_tensor().scale().get();
    assert!(matches!(
        eval.relinearize_rescale_with(big_tensor(), None),
        Err(Error::Operand(OperandError::ScaleOverflow { .. }))
    ));
    let relabelled = eval
        .relinearize_rescale_unchecked_with(big_tensor(), None)
        .unwrap();
    assert_eq!(relabelled.scale().get(), t_scale / q);

    // Level 0; an addend at another level; no relinearisation key. At
    // level 0 the default scales' product passes q_0 and is refused as a
    // tensor already; relabelled to 2^20, their product fits q_0 and only
    // the rescale is refused.
    let bottom: Vec<Ciphertext> = cts[..2]
        .iter()
        .map(|c| eval.level_down(c, Level(0)).unwrap())
        .collect();
    assert!(matches!(
        eval.tensor(&bottom[0], &bottom[1]),
        Err(Error::Operand(OperandError::ScaleOutOfRange { .. }))
    ));
    let bottom: Vec<Ciphertext> = bottom
        .iter()
        .map(|c| eval.set_scale(c, Scale(2f64.powi(20))).unwrap())
        .collect();
    for result in [
        eval.relinearize_rescale_with(eval.tensor(&bottom[0], &bottom[1]).unwrap(), None),
        eval.relinearize_rescale_unchecked_with(eval.tensor(&bottom[0], &bottom[1]).unwrap(), None),
    ] {
        assert!(
            matches!(
                result,
                Err(Error::Operand(OperandError::LevelTooLow { .. }))
            ),
            "{:?}",
            result.map(|_| ())
        );
    }
    let low = eval.level_down(&cts[4], Level(level.0 - 1)).unwrap();
    let low_addend = eval.mult_without_rescale(&low, &low).unwrap();
    let mismatched = eval.relinearize_rescale_unchecked_with(
        eval.tensor(&cts[0], &cts[1]).unwrap(),
        Some(&low_addend),
    );
    assert!(
        matches!(mismatched, Err(Error::Operand(_))),
        "{:?}",
        mismatched.map(|_| ())
    );
    let keyless = Evaluator::new(&s.context);
    assert!(matches!(
        keyless.relinearize_rescale_with(keyless.tensor(&cts[0], &cts[1]).unwrap(), None),
        Err(Error::Key(_))
    ));
}

/// Hoisted rotations (their ModDowns batched) give, step by step and in
/// order, the limbs of one rotation at a time from the same decomposition,
/// steps of 0 and repeated steps included.
#[test]
fn hoisted_rotations_equal_single_rotations_from_the_decomposition() {
    let s = Setup::new(Preset::TestFGb, 93);
    let steps = [3i64, 0, 1, -2, 5, 3, 8, -7, 2];
    let eval = s.evaluator(&KeySetRequest {
        rotations: steps.iter().copied().filter(|&k| k != 0).collect(),
        ..Default::default()
    });
    let slots = s.context.params().slots();
    let values = unit_disk(&mut seeded_rng(94), slots);
    let ct = s.encrypt(&values);
    let decomposition = eval.decompose(&ct).unwrap();
    let hoisted = eval.rotate_hoisted(&ct, &steps).unwrap();
    assert_eq!(hoisted.len(), steps.len());
    // Any batch size gives the same limbs.
    for batch in [1, 3, steps.len()] {
        let other = eval
            .clone()
            .with_mod_down_batch(batch)
            .rotate_hoisted(&ct, &steps)
            .unwrap();
        for (a, b) in other.iter().zip(&hoisted) {
            assert_eq!(
                a.parts().0.to_words().unwrap(),
                b.parts().0.to_words().unwrap()
            );
            assert_eq!(
                a.parts().1.to_words().unwrap(),
                b.parts().1.to_words().unwrap()
            );
        }
    }
    for (rotated, &k) in hoisted.iter().zip(&steps) {
        let one = eval.rotate_decomposed(&ct, &decomposition, k).unwrap();
        assert_eq!(
            rotated.parts().0.to_words().unwrap(),
            one.parts().0.to_words().unwrap(),
            "step {k}"
        );
        assert_eq!(
            rotated.parts().1.to_words().unwrap(),
            one.parts().1.to_words().unwrap(),
            "step {k}"
        );
        let got = s.decrypt(rotated);
        let precision = bits(max_abs_error(&got, &rotate_left(&values, k)));
        assert!(precision > 15.0, "step {k}: {precision:.1} bits");
    }
    // A missing key is still a typed error, whichever batch it falls in.
    assert!(matches!(
        eval.rotate_hoisted(&ct, &[1, 2, 3, 5, 4]),
        Err(Error::Key(KeyError::MissingRotationKey { step: 4 }))
    ));
}

/// A constant product at a lower level in one pass equals `level_down`
/// then the product, limb for limb, at every level below the input's and
/// at its own; a level above it is a typed error.
#[test]
fn a_constant_product_at_a_lower_level_equals_level_down_then_the_product() {
    let s = Setup::new(Preset::TestFGb, 95);
    let eval = s.evaluator(&KeySetRequest::default());
    let slots = s.context.params().slots();
    let mut rng = seeded_rng(96);
    let values = unit_disk(&mut rng, slots);
    let ct = s.encrypt(&values);
    let words = |ct: &Ciphertext| {
        let (c0, c1) = ct.parts();
        (c0.to_words().unwrap(), c1.to_words().unwrap())
    };
    for level in 0..=ct.level().0 {
        let level = Level(level);
        for c in [Complex64::new(0.37, 0.0), Complex64::new(-0.8, 0.25)] {
            // Small enough for the product to fit q_0 at level 0.
            let scale = Scale(2f64.powi(10));
            let one = eval.mult_const_at_level(&ct, c, scale, level).unwrap();
            let two = eval
                .mult_const_without_rescale(&eval.level_down(&ct, level).unwrap(), c, scale)
                .unwrap();
            assert_eq!(words(&one), words(&two), "level {level:?}, {c}");
            assert_eq!((one.level(), one.scale()), (two.level(), two.scale()));
        }
    }
    let above = Level(ct.level().0 + 1);
    assert!(matches!(
        eval.mult_const_at_level(&ct, Complex64::new(0.5, 0.0), Scale(2.0), above),
        Err(Error::Operand(OperandError::LevelOutOfRange { .. }))
    ));
}

/// A product by a complex constant reuses the constant's polynomial the
/// evaluator kept from an earlier product (same primes, same constant):
/// the results are those of an evaluator that encodes it afresh, limb for
/// limb, at every level and for every constant, and decrypt to `c·x`.
#[test]
fn kept_complex_constants_multiply_as_freshly_encoded_ones() {
    let s = Setup::new(Preset::TestFGb, 97);
    let eval = s.evaluator(&KeySetRequest::default());
    let slots = s.context.params().slots();
    let mut rng = seeded_rng(98);
    let words = |ct: &Ciphertext| {
        let (c0, c1) = ct.parts();
        (c0.to_words().unwrap(), c1.to_words().unwrap())
    };
    let constants = [
        Complex64::new(0.0, -1.0),
        Complex64::new(0.0, 1.0),
        Complex64::new(-0.8, 0.25),
        Complex64::new(0.5, 0.75),
        Complex64::new(0.3, -0.6),
    ];
    // Twice through more constants and levels than the evaluator keeps:
    // hits, misses and evictions, each checked against a fresh evaluator.
    let top = s.encrypt(&unit_disk(&mut rng, slots)).level().0;
    for round in 0..2 {
        for level in [top, 1] {
            for &c in &constants {
                let values = unit_disk(&mut rng, slots);
                let ct = eval.level_down(&s.encrypt(&values), Level(level)).unwrap();
                let scale = Scale(1.0);
                let kept = eval.mult_const_without_rescale(&ct, c, scale).unwrap();
                let fresh = s
                    .evaluator(&KeySetRequest::default())
                    .mult_const_without_rescale(&ct, c, scale)
                    .unwrap();
                assert_eq!(
                    words(&kept),
                    words(&fresh),
                    "round {round}, level {level}, {c}"
                );
                let expected: Vec<Complex64> = values
                    .iter()
                    .map(|v| v * Complex64::new(c.re.round(), c.im.round()))
                    .collect();
                let precision = bits(max_abs_error(&s.decrypt(&kept), &expected));
                assert!(precision > 15.0, "level {level}, {c}: {precision:.1} bits");
            }
        }
    }
}

/// Every scale the evaluator labels an object with lies in `[1, Q_l)`, the
/// range the loaders accept: a scale outside it decrypts to garbage (a
/// product past `Q_l` has wrapped) or reads back as NaN, and a saved
/// object could never be loaded again.
#[test]
fn scales_outside_one_to_q_l_are_refused_where_objects_are_made() {
    let s = Setup::new(Preset::TestFGb, 131);
    let eval = s.evaluator(&KeySetRequest::default());
    let params = s.context.params();
    let slots = params.slots();
    let mut rng = seeded_rng(132);
    let values = unit_disk(&mut rng, slots);
    let ct = s.encrypt(&values);
    let level = ct.level();
    let log_q = params.log_q(level).unwrap();
    let out_of_range = |r: hemem_ckks::Result<Ciphertext>| {
        matches!(r, Err(Error::Operand(OperandError::ScaleOutOfRange { .. })))
    };
    // Relabelling: below 1, at Q_l, and just below Q_l (accepted, and
    // saved objects load).
    for bad in [0.5, 1e-300, 2f64.powf(log_q), 2f64.powf(log_q + 3.0)] {
        assert!(out_of_range(eval.set_scale(&ct, Scale(bad))), "{bad:e}");
    }
    let top = eval.set_scale(&ct, Scale(2f64.powf(log_q - 1.0))).unwrap();
    let bytes = top.to_bytes().unwrap();
    assert!(Ciphertext::from_bytes(&s.context, &bytes).is_ok());
    // Encoding at a scale below 1 (every coefficient would round to 0) or
    // at Q_l.
    for bad in [1e-30, 0.25, 2f64.powf(log_q)] {
        assert!(matches!(
            s.encoder.encode_at(&values, level, Scale(bad), slots),
            Err(Error::Operand(OperandError::ScaleOutOfRange { .. }))
        ));
    }
    // Products that are not rescaled: a constant whose scale takes the
    // product past Q_l, a tensor or a plaintext product whose scales
    // multiply past Q_0 at level 0.
    let past = Scale(2f64.powf(log_q - ct.scale().get().log2() + 1.0));
    assert!(out_of_range(eval.mult_const_without_rescale(
        &ct,
        Complex64::new(0.5, 0.0),
        past
    )));
    assert!(out_of_range(eval.mult_const_at_level(
        &ct,
        Complex64::new(0.5, 0.0),
        Scale(2f64.powi(20)),
        Level(0)
    )));
    let bottom = eval.level_down(&ct, Level(0)).unwrap();
    let q0_bits = params.log_q(Level(0)).unwrap();
    assert!(bottom.scale().get().log2() * 2.0 >= q0_bits);
    assert!(matches!(
        eval.tensor(&bottom, &bottom),
        Err(Error::Operand(OperandError::ScaleOutOfRange { .. }))
    ));
    assert!(out_of_range(eval.mult_without_rescale(&bottom, &bottom)));
    let plain = s
        .encoder
        .encode_at(&values, Level(0), bottom.scale(), slots)
        .unwrap();
    assert!(out_of_range(
        eval.mult_plain_without_rescale(&bottom, &plain)
    ));
    assert!(out_of_range(eval.mult_plain_sum(&[(&bottom, &plain)])));
    // Levelling a large scale down past what the smaller modulus holds; a
    // rescale that would leave a scale below 1; integer coefficients at a
    // scale below 1.
    let large = eval
        .mult_const_without_rescale(&ct, Complex64::new(0.5, 0.0), Scale(2f64.powi(30)))
        .unwrap();
    assert!(out_of_range(eval.level_down(&large, Level(0))));
    assert!(eval.level_down(&large, Level(2)).is_ok());
    let small = eval.set_scale(&ct, Scale(2f64.powi(20))).unwrap();
    assert!(out_of_range(eval.rescale(&small)));
    assert!(
        eval.rescale_unchecked(&small).is_ok(),
        "unchecked, as named"
    );
    for bad in [0.5, f64::NAN] {
        assert!(
            s.encoder
                .encode_integer_coefficients(&[(0, 1.0)], level, Scale(bad), slots)
                .is_err(),
            "{bad}"
        );
    }
    // Integer coefficients tagged with a slot count the context does not
    // have (0 slots made a later rotation divide by zero), or placed past
    // the last coefficient (usize::MAX overflowed the error's length).
    let scale = params.default_scale(level).unwrap();
    let n = params.degree().get();
    for bad_slots in [0, 3, n] {
        assert!(
            matches!(
                s.encoder
                    .encode_integer_coefficients(&[(0, 1.0)], level, scale, bad_slots),
                Err(Error::Operand(OperandError::InvalidSlots { .. }))
            ),
            "{bad_slots}"
        );
    }
    assert!(matches!(
        s.encoder
            .encode_integer_coefficients(&[(usize::MAX, 1.0)], level, scale, slots),
        Err(Error::LengthMismatch { .. })
    ));
    // A constant whose coefficient would wrap around Q_0 (1e5 at scale
    // 2^42 over a 58-bit q_0), added or multiplied, as the encoder refuses.
    let level0 = eval.level_down(&ct, Level(0)).unwrap();
    for c in [Complex64::new(1e5, 0.0), Complex64::new(0.0, -1e5)] {
        assert!(matches!(
            eval.add_const(&level0, c),
            Err(Error::Operand(OperandError::NonFiniteValue))
        ));
    }
    assert!(matches!(
        eval.mult_const_without_rescale(
            &level0,
            Complex64::new(2f64.powi(48), 0.0),
            Scale(2f64.powi(10))
        ),
        Err(Error::Operand(OperandError::NonFiniteValue))
    ));
    assert!(eval.add_const(&level0, Complex64::new(0.5, -0.25)).is_ok());
    // A plaintext over Q_l ∪ P (double hoisting's) is not saved: the
    // format holds plaintexts over Q_l, and the file could not be loaded.
    let extended = s
        .encoder
        .encode_extended_at_class(&values, level, ct.scale(), slots, MemoryClass::Plaintext)
        .unwrap();
    assert!(extended.is_extended());
    assert!(matches!(
        extended.to_bytes(),
        Err(Error::Serialization(
            hemem_ckks::SerializationError::InvalidField {
                field: "extended plaintext"
            }
        ))
    ));
    let plain = s
        .encoder
        .encode_at(&values, level, ct.scale(), slots)
        .unwrap();
    assert!(Plaintext::from_bytes(&s.context, &plain.to_bytes().unwrap()).is_ok());
    // A product at the top level fits, and decrypts to the product.
    let half = eval
        .mult_const_without_rescale(&ct, Complex64::new(0.5, 0.0), Scale(2f64.powi(20)))
        .unwrap();
    let want: Vec<Complex64> = values.iter().map(|v| v * 0.5).collect();
    assert!(max_abs_error(&s.decrypt(&half), &want) < 1e-6);
}

/// Keys of another context (another key generation) are refused by every
/// key switch, where they used to return noise.
#[test]
fn keys_of_another_context_are_refused() {
    let s = Setup::new(Preset::TestFGb, 141);
    let other = Setup::new(Preset::TestFGb, 142);
    let request = KeySetRequest {
        relinearization: true,
        conjugation: true,
        rotations: vec![1],
        ..Default::default()
    };
    let foreign = other.keygen.key_set(&other.secret, &request).unwrap();
    let eval = Evaluator::with_keys(&s.context, Arc::new(foreign));
    let slots = s.context.params().slots();
    let ct = s.encrypt(&unit_disk(&mut seeded_rng(143), slots));
    let mismatch = |r: hemem_ckks::Result<Ciphertext>| {
        matches!(r, Err(Error::Operand(OperandError::ContextMismatch)))
    };
    assert!(mismatch(eval.mult(&ct, &ct)));
    assert!(mismatch(eval.rotate(&ct, 1)));
    assert!(mismatch(eval.conjugate(&ct)));
    // The context's own keys work.
    let own = s.evaluator(&request);
    assert!(own.rotate(&ct, 1).is_ok());
}

/// Galois elements are taken modulo 2N and must be odd: an even one is a
/// typed error (it made a key that switched to noise), an unreduced one is
/// filed under its residue, where lookups find it.
#[test]
fn galois_keys_take_elements_modulo_two_n_and_refuse_even_ones() {
    let s = Setup::new(Preset::TestFGb, 151);
    let n = s.context.params().degree().get() as u64;
    for even in [0, 2, 2 * n, 2 * n + 6] {
        assert!(
            matches!(
                s.keygen.galois_key(&s.secret, GaloisElement(even)),
                Err(Error::Key(KeyError::InvalidGaloisElement { .. }))
            ),
            "{even}"
        );
    }
    let five = GaloisElement::rotation(1, n as usize);
    let key = s
        .keygen
        .galois_key(&s.secret, GaloisElement(five.0 + 2 * n))
        .unwrap();
    assert_eq!(key.kind(), hemem_ckks::keys::KeyKind::Rotation(five));
    let conj = s
        .keygen
        .galois_key(&s.secret, GaloisElement(u64::MAX))
        .unwrap();
    assert_eq!(conj.kind(), hemem_ckks::keys::KeyKind::Conjugation);
}

/// `RnsPoly::automorphism` (and every backend's) takes its Galois element
/// modulo 2N and refuses an even one: `5 + 2N` is rotation by one,
/// `u64::MAX` (odd, `2N − 1` modulo 2N) is conjugation, and 2 or 0, which
/// are not automorphisms, are typed errors (the CPU overflowed on 0 and
/// `u64::MAX` in debug builds and applied 2 as a garbage map).
#[test]
fn automorphisms_take_elements_modulo_2n_and_refuse_even_ones() {
    let s = Setup::new(Preset::TestFGb, 137);
    let n = s.context.params().degree().get();
    let two_n = 2 * n as u64;
    let mut rng = seeded_rng(137);
    let ct = s.encrypt(&unit_disk(&mut rng, s.context.params().slots()));
    let x = ct.parts().0;
    let apply = |g: u64| {
        x.automorphism(GaloisElement(g), MemoryClass::Temporary)
            .and_then(|p| p.to_words())
    };
    let five = apply(5).unwrap();
    assert_ne!(five, x.to_words().unwrap());
    assert_eq!(apply(5 + two_n).unwrap(), five);
    assert_eq!(apply(5 + 7 * two_n).unwrap(), five);
    assert_eq!(
        apply(u64::MAX).unwrap(),
        apply(GaloisElement::conjugation(n).0).unwrap()
    );
    for even in [0, 2, two_n, u64::MAX - 1] {
        assert!(
            matches!(
                apply(even),
                Err(Error::Key(KeyError::InvalidGaloisElement { .. }))
            ),
            "{even}"
        );
    }
}

/// `words` in a new buffer of `moduli.len()` limbs on `backend`.
fn upload(backend: &Arc<dyn Backend>, moduli: &[usize], words: &[u64]) -> hemem_memory::Buffer {
    let mut b = backend
        .allocate(MemoryClass::Temporary, moduli.len(), false)
        .unwrap();
    backend
        .write(
            LimbsMut::new(backend.as_ref(), &mut b, moduli).unwrap(),
            words,
        )
        .unwrap();
    b
}

/// The words of `buffer`'s `moduli.len()` limbs on `backend`.
fn download(
    backend: &Arc<dyn Backend>,
    moduli: &[usize],
    buffer: &hemem_memory::Buffer,
) -> Vec<u64> {
    let mut words = vec![0u64; moduli.len() * backend.degree()];
    backend
        .read(
            Limbs::new(backend.as_ref(), buffer, moduli).unwrap(),
            &mut words,
        )
        .unwrap();
    words
}

/// `Backend::add_automorphism_assign` adds `x[perm_g[j]]` to word `j` of
/// every limb (the addition that ends a rotation, without a rotated copy):
/// against the permutation and the modular sum by hand, for rotations both
/// ways and conjugation; an even element is a typed error.
#[test]
fn adding_through_an_automorphism_matches_the_permutation() {
    let s = Setup::new(Preset::TestFGb, 141);
    let params = s.context.params();
    let n = params.degree().get();
    let backend = s.context.backend();
    let moduli = params.q_indices(params.max_level()).unwrap();
    let table = params.all_moduli();
    let mut rng = seeded_rng(141);
    let x_words = random_residues(params, &moduli, &mut rng).unwrap();
    let acc_words = random_residues(params, &moduli, &mut rng).unwrap();
    let buffer = |words: &[u64]| upload(backend, &moduli, words);
    let x = buffer(&x_words);
    for g in [
        GaloisElement::rotation(1, n),
        GaloisElement::rotation(-77, n),
        GaloisElement::conjugation(n),
    ] {
        let mut acc = buffer(&acc_words);
        backend
            .add_automorphism_assign(
                LimbsMut::new(backend.as_ref(), &mut acc, &moduli).unwrap(),
                Limbs::new(backend.as_ref(), &x, &moduli).unwrap(),
                g,
            )
            .unwrap();
        let got = download(backend, &moduli, &acc);
        let perm = automorphism_permutation(n, g);
        for (i, &m) in moduli.iter().enumerate() {
            let q = u128::from(table[m].value());
            for (j, &p) in perm.iter().enumerate() {
                let sum = u128::from(acc_words[i * n + j]) + u128::from(x_words[i * n + p]);
                assert_eq!(
                    u128::from(got[i * n + j]),
                    sum % q,
                    "{g:?} limb {i} word {j}"
                );
            }
        }
    }
    let mut acc = buffer(&acc_words);
    assert!(matches!(
        backend.add_automorphism_assign(
            LimbsMut::new(backend.as_ref(), &mut acc, &moduli).unwrap(),
            Limbs::new(backend.as_ref(), &x, &moduli).unwrap(),
            GaloisElement(4),
        ),
        Err(Error::Key(KeyError::InvalidGaloisElement { .. }))
    ));
}

/// `Backend::scalar_mul_add_assign` adds `x·s_i` to every word of limb `i`
/// (relinearisation's `P·d` onto the inner product): against the modular
/// product and sum by hand, with scalars above the moduli too (reduced
/// first).
#[test]
fn a_scalar_multiply_add_matches_the_modular_arithmetic() {
    let s = Setup::new(Preset::TestFGb, 143);
    let params = s.context.params();
    let n = params.degree().get();
    let backend = s.context.backend();
    let moduli = params.q_indices(params.max_level()).unwrap();
    let table = params.all_moduli();
    let mut rng = seeded_rng(143);
    let x_words = random_residues(params, &moduli, &mut rng).unwrap();
    let acc_words = random_residues(params, &moduli, &mut rng).unwrap();
    let scalars: Vec<u64> = moduli.iter().map(|_| rng.next_u64()).collect();
    let buffer = |words: &[u64]| upload(backend, &moduli, words);
    let x = buffer(&x_words);
    let mut acc = buffer(&acc_words);
    backend
        .scalar_mul_add_assign(
            LimbsMut::new(backend.as_ref(), &mut acc, &moduli).unwrap(),
            Limbs::new(backend.as_ref(), &x, &moduli).unwrap(),
            &scalars,
        )
        .unwrap();
    let got = download(backend, &moduli, &acc);
    for (i, &m) in moduli.iter().enumerate() {
        let q = u128::from(table[m].value());
        let s = u128::from(scalars[i]) % q;
        for j in 0..n {
            let want = (u128::from(acc_words[i * n + j]) + u128::from(x_words[i * n + j]) * s) % q;
            assert_eq!(u128::from(got[i * n + j]), want, "limb {i} word {j}");
        }
    }
    // One scalar short is a typed error.
    assert!(matches!(
        backend.scalar_mul_add_assign(
            LimbsMut::new(backend.as_ref(), &mut acc, &moduli).unwrap(),
            Limbs::new(backend.as_ref(), &x, &moduli).unwrap(),
            &scalars[1..],
        ),
        Err(Error::LengthMismatch { .. })
    ));
}

/// `Backend::key_switch_inner_product_galois` (the CPU reads the digits
/// through the permutation block by block) equals every digit rotated by
/// `Backend::automorphism` first and the plain inner product, for three
/// digits (an odd count: a pass of one) and two elements.
#[test]
fn the_inner_product_through_an_automorphism_equals_rotated_digits() {
    let s = Setup::new(Preset::TestFGb, 145);
    let params = s.context.params();
    let n = params.degree().get();
    let backend = s.context.backend();
    let moduli = params.qp_indices(params.max_level()).unwrap();
    let mut rng = seeded_rng(145);
    let mut buffer = || {
        upload(
            backend,
            &moduli,
            &random_residues(params, &moduli, &mut rng).unwrap(),
        )
    };
    let digits: Vec<_> = (0..3).map(|_| buffer()).collect();
    let (b, a): (Vec<_>, Vec<_>) = (0..3).map(|_| (buffer(), buffer())).unzip();
    macro_rules! view {
        ($x:expr) => {
            Limbs::new(backend.as_ref(), $x, &moduli).unwrap()
        };
    }
    let read = |x: &hemem_memory::Buffer| download(backend, &moduli, x);
    let bv: Vec<_> = b.iter().map(|x| view!(x)).collect();
    let av: Vec<_> = a.iter().map(|x| view!(x)).collect();
    for g in [GaloisElement::rotation(9, n), GaloisElement::conjugation(n)] {
        let (mut o0, mut o1) = (buffer(), buffer());
        backend
            .key_switch_inner_product_galois(
                &digits.iter().map(|x| view!(x)).collect::<Vec<_>>(),
                g,
                &bv,
                &av,
                LimbsMut::new(backend.as_ref(), &mut o0, &moduli).unwrap(),
                LimbsMut::new(backend.as_ref(), &mut o1, &moduli).unwrap(),
            )
            .unwrap();
        let rotated: Vec<_> = digits
            .iter()
            .map(|d| {
                let mut r = buffer();
                backend
                    .automorphism(
                        view!(d),
                        g,
                        LimbsMut::new(backend.as_ref(), &mut r, &moduli).unwrap(),
                    )
                    .unwrap();
                r
            })
            .collect();
        let (mut r0, mut r1) = (buffer(), buffer());
        backend
            .key_switch_inner_product(
                &rotated.iter().map(|x| view!(x)).collect::<Vec<_>>(),
                &bv,
                &av,
                LimbsMut::new(backend.as_ref(), &mut r0, &moduli).unwrap(),
                LimbsMut::new(backend.as_ref(), &mut r1, &moduli).unwrap(),
            )
            .unwrap();
        assert_eq!(read(&o0), read(&r0), "{g:?}, first part");
        assert_eq!(read(&o1), read(&r1), "{g:?}, second part");
    }
}
