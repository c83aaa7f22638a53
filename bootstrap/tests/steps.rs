//! Each bootstrapping sub-step on real ciphertexts (the test presets, CPU)
//! against its plaintext counterpart: SlotToCoeff and CoeffToSlot against
//! the same DFT factors applied in f64, EvalMod against the same circuit in
//! f64 and against the exact modular reduction it approximates.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Arc;

use hemem_bootstrap::BootstrapKeys;
use hemem_bootstrap::CkksOps;
use hemem_bootstrap::coeff_to_slot::coeff_to_slot;
use hemem_bootstrap::dft::DiagonalMatrix;
use hemem_bootstrap::eval_mod::EvalMod;
use hemem_bootstrap::linear_transform::{DiagonalStorage, Hoisting, LinearTransform};
use hemem_bootstrap::schedule::{BootstrapSchedule, INPUT_LEVEL};
use hemem_bootstrap::slot_to_coeff::slot_to_coeff;
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{seed32, seeded_rng, unit_disk};
use num_complex::Complex64;
use rand_core::Rng;

struct Setup {
    context: Context,
    secret: SecretKey,
    public: PublicKey,
    schedule: BootstrapSchedule,
    evaluator: Evaluator,
    keygen: KeyGenerator,
}

fn setup(preset: Preset) -> Setup {
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params.clone(), DeviceSelection::Cpu).unwrap();
    let keygen = KeyGenerator::with_seed(&context, seed32(40 + preset as u64));
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let schedule = BootstrapSchedule::recommended(&params).unwrap();
    let keys = BootstrapKeys::generate(&keygen, &secret, &schedule).unwrap();
    let evaluator = Evaluator::with_keys(&context, Arc::clone(keys.key_set()));
    Setup {
        context,
        secret,
        public,
        schedule,
        evaluator,
        keygen,
    }
}

impl Setup {
    fn encrypt(&self, values: &[Complex64], level: usize, scale: f64, seed: u64) -> Ciphertext {
        let pt = Encoder::new(&self.context)
            .encode_at(values, Level(level), Scale(scale), values.len())
            .unwrap();
        Encryptor::with_seed(&self.context, seed32(seed))
            .encrypt(&pt, &self.public)
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
}

fn max_error(a: &[Complex64], b: &[Complex64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max)
}

/// Magnitude of the largest value.
fn max_norm(a: &[Complex64]) -> f64 {
    a.iter().map(|x| x.norm()).fold(0.0, f64::max)
}

/// The evaluations every DFT test runs: single and double hoisting, the
/// latter with compact diagonals (expanded over `Q ∪ P` when used) and with
/// encoded ones (stored over `Q ∪ P`).
const HOISTINGS: [(Hoisting, DiagonalStorage); 3] = [
    (Hoisting::Single, DiagonalStorage::Compact),
    (Hoisting::Double, DiagonalStorage::Compact),
    (Hoisting::Double, DiagonalStorage::Encoded),
];

/// A random diagonal-sparse matrix (random indices and entries in the unit
/// disk) applied by a BSGS linear transform to a random ciphertext, with
/// single and double hoisting, compact and encoded diagonals, against the
/// f64 matrix-vector product; double hoisting is at least as precise (its
/// ModDown rounding is not multiplied by the diagonals). Each encoded
/// transform moved to the host and back evaluates to the same words.
#[test]
fn random_linear_transforms_match_the_f64_product() {
    let s = setup(Preset::TestFGb);
    let params = s.context.params();
    let slots = s.schedule.slots();
    let mut rng = seeded_rng(70);
    for trial in 0..3u64 {
        // Indices within ±40 (giant steps by Horner with ±8) and a few
        // anywhere (giant steps taken directly).
        let mut indices: Vec<i64> = (0..24)
            .map(|i| {
                let r = rng.next_u64();
                if i < 21 {
                    (r % 80) as i64 - 40
                } else {
                    (r % slots as u64) as i64
                }
            })
            .collect();
        indices.sort_unstable();
        indices.dedup();
        let matrix = DiagonalMatrix::from_diagonals(
            slots,
            indices.iter().map(|&d| (d, unit_disk(&mut rng, slots))),
        )
        .unwrap();
        let lt = LinearTransform::with_n1(matrix.clone(), 8).unwrap();
        let request = KeySetRequest {
            rotations: lt.rotations().into_iter().map(|r| r as i64).collect(),
            ..Default::default()
        };
        let keys = s.keygen.key_set(&s.secret, &request).unwrap();
        let evaluator = Evaluator::with_keys(&s.context, Arc::new(keys));
        let level = 6;
        let z = unit_disk(&mut rng, slots);
        let in_scale = params.default_scale(Level(level)).unwrap().get();
        let ct = s.encrypt(&z, level, in_scale, 71 + trial);
        let ops = CkksOps::new(&evaluator);
        let q = params.q_moduli()[level].value();
        let d_scale = LinearTransform::diagonal_scale(in_scale, in_scale / 4.0, q);
        let want = matrix.apply(&z).unwrap();
        let mut errors = Vec::new();
        for (hoisting, storage) in HOISTINGS {
            let enc = lt
                .encode_hoisted(&ops, level, d_scale, storage, hoisting)
                .unwrap();
            let out = enc.evaluate(&ops, &ct).unwrap();
            assert_eq!(out.level(), Level(level - 1));
            // Moved to the host and back (a hand-written swap), the
            // transform keeps its bytes and gives the same words.
            let moved = enc.to_host().unwrap().to_device().unwrap();
            assert_eq!(moved.size_bytes(), enc.size_bytes());
            assert!(moved.size_bytes() > 0);
            let again = moved.evaluate(&ops, &ct).unwrap();
            assert_eq!(
                again.parts().0.to_words().unwrap(),
                out.parts().0.to_words().unwrap()
            );
            assert_eq!(
                again.parts().1.to_words().unwrap(),
                out.parts().1.to_words().unwrap()
            );
            let err = max_error(&s.decrypt(&out), &want);
            println!(
                "trial {trial}, {} diagonals, {hoisting:?} {storage:?}: max error 2^{:.1}",
                indices.len(),
                err.log2()
            );
            assert!(err < 2f64.powi(-20), "{hoisting:?}: 2^{:.1}", err.log2());
            errors.push(err);
        }
        assert!(errors[1] < 2.0 * errors[0], "double: {errors:?}");
    }
}

/// SlotToCoeff from level 3 to level 0, with its scales absorbing the input
/// scale, equals the f64 product of its DFT factors.
#[test]
fn slot_to_coeff_matches_its_dft_in_f64() {
    for preset in [Preset::TestFGb, Preset::TestFVb] {
        let s = setup(preset);
        let params = s.context.params();
        let slots = s.schedule.slots();
        let z = unit_disk(&mut seeded_rng(50), slots);
        let input_scale = params.default_scale(Level(INPUT_LEVEL)).unwrap().get();
        let ct = s.encrypt(&z, params.enc_level().get(), input_scale, 51);
        let ct = s.evaluator.level_down(&ct, Level(INPUT_LEVEL)).unwrap();
        let ops = CkksOps::new(&s.evaluator);
        let scales = s.schedule.stc_diagonal_scales(params, input_scale).unwrap();
        let dft = s.schedule.stc_dft().unwrap();
        for (hoisting, storage) in HOISTINGS {
            let encoded = dft
                .encode_hoisted(
                    &ops,
                    INPUT_LEVEL,
                    &scales,
                    s.schedule.log_bsgs_ratio,
                    storage,
                    hoisting,
                )
                .unwrap();
            let out = slot_to_coeff(&ops, &ct, &encoded).unwrap();
            assert_eq!(out.level(), Level(0));
            let rel = (out.scale().get() - s.schedule.delta0).abs() / s.schedule.delta0;
            assert!(rel < 1e-9, "lands on Δ0: relative difference {rel:e}");
            let want = dft.apply(&z).unwrap();
            let err = max_error(&s.decrypt(&out), &want) / max_norm(&want);
            println!(
                "{preset} {hoisting:?} {storage:?}: SlotToCoeff relative error 2^{:.1}",
                err.log2()
            );
            assert!(
                err < 2f64.powi(-28),
                "{preset} {hoisting:?}: relative error 2^{:.1}",
                err.log2()
            );
        }
    }
}

/// CoeffToSlot at the top level on a value at scale `q0` (what ModRaise
/// hands it) equals the f64 product of its DFT factors, at `S_em`.
#[test]
fn coeff_to_slot_matches_its_dft_in_f64() {
    for preset in [Preset::TestFGb, Preset::TestFVb] {
        let s = setup(preset);
        let params = s.context.params();
        let slots = s.schedule.slots();
        let top = s.schedule.top_level;
        let q0 = params.q_moduli()[0].value() as f64;
        // ModRaised slots reach a few times K/|coefficients|; here ±8.
        let w: Vec<Complex64> = unit_disk(&mut seeded_rng(60), slots)
            .into_iter()
            .map(|v| v * 8.0)
            .collect();
        let ct = s.encrypt(&w, top, q0, 61);
        let ops = CkksOps::new(&s.evaluator);
        let dft = s.schedule.cts_dft().unwrap();
        for (hoisting, storage) in HOISTINGS {
            let encoded = dft
                .encode_hoisted(
                    &ops,
                    top,
                    &s.schedule.cts_diagonal_scales,
                    s.schedule.log_bsgs_ratio,
                    storage,
                    hoisting,
                )
                .unwrap();
            let out = coeff_to_slot(&ops, &ct, &encoded).unwrap();
            assert_eq!(out.level(), Level(s.schedule.eval_mod_level));
            let rel = (out.scale().get() - s.schedule.s_em).abs() / s.schedule.s_em;
            assert!(rel < 1e-9, "lands on S_em: relative difference {rel:e}");
            let want = dft.apply(&w).unwrap();
            let err = max_error(&s.decrypt(&out), &want) / max_norm(&want);
            println!(
                "{preset} {hoisting:?} {storage:?}: CoeffToSlot relative error 2^{:.1}",
                err.log2()
            );
            assert!(
                err < 2f64.powi(-36),
                "{preset} {hoisting:?}: relative error 2^{:.1}",
                err.log2()
            );
        }
    }
}

/// EvalMod on `y = (I + ε)/K` for integers `|I| < K` and small `ε`, from
/// `S_em` at level `L − 3` landing on `S_x`: equal to the same circuit in
/// f64, and to `ε` (the reduction it approximates) within the circuit's
/// approximation error.
#[test]
fn eval_mod_matches_its_circuit_and_reduces_modulo_one() {
    for preset in [Preset::TestFGb, Preset::TestFGa, Preset::TestFVb] {
        let s = setup(preset);
        let slots = s.schedule.slots();
        let eval_mod = EvalMod::new(s.schedule.choice.eval_mod).unwrap();
        let k = f64::from(s.schedule.choice.eval_mod.k);
        let eps = 2f64.powi(-(s.schedule.choice.rho as i32));
        let mut rng = seeded_rng(70);
        let mut uniform = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let (integers, residues): (Vec<f64>, Vec<f64>) = (0..slots)
            .map(|_| {
                let i = ((2.0 * uniform() - 1.0) * (k - 1.0)).round();
                (i, (2.0 * uniform() - 1.0) * eps)
            })
            .unzip();
        let y: Vec<Complex64> = integers
            .iter()
            .zip(&residues)
            .map(|(i, e)| Complex64::new((i + e) / k, 0.0))
            .collect();
        let ct = s.encrypt(&y, s.schedule.eval_mod_level, s.schedule.s_em, 71);
        let ops = CkksOps::new(&s.evaluator);
        let out = eval_mod.evaluate(&ops, &ct, s.schedule.s_x).unwrap();
        assert_eq!(
            out.level(),
            Level(s.schedule.eval_mod_level - eval_mod.depth())
        );
        let rel = (out.scale().get() - s.schedule.s_x).abs() / s.schedule.s_x;
        assert!(rel < 1e-9, "lands on S_x: relative difference {rel:e}");
        let got = s.decrypt(&out);
        let circuit: Vec<Complex64> = y
            .iter()
            .map(|v| Complex64::new(eval_mod.evaluate_f64(v.re), 0.0))
            .collect();
        let ideal: Vec<Complex64> = residues.iter().map(|&e| Complex64::new(e, 0.0)).collect();
        let vs_circuit = max_error(&got, &circuit);
        let vs_ideal = max_error(&got, &ideal);
        let f64_vs_ideal = max_error(&circuit, &ideal);
        println!(
            "{preset}: EvalMod error 2^{:.1} against its f64 circuit, 2^{:.1} against ε \
             (the f64 circuit's own: 2^{:.1})",
            vs_circuit.log2(),
            vs_ideal.log2(),
            f64_vs_ideal.log2()
        );
        // The bootstrap's residues are ε ≤ 2^−ρ; 2^−35 is ~2^−20 of that.
        assert!(vs_circuit < 2f64.powi(-36), "{preset}: against the circuit");
        assert!(
            vs_ideal <= vs_circuit + f64_vs_ideal * 1.01,
            "{preset}: the triangle inequality"
        );
        assert!(vs_ideal < 2f64.powi(-35), "{preset}: against ε");
    }
}
