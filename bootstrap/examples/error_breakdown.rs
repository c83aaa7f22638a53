//! Where a bootstrap's error comes from: runs one bootstrap on the CPU,
//! decrypts every stage and compares it with its plaintext counterpart
//! computed in f64 from the stage's own decrypted input.
//!
//! ```text
//! cargo run --release -p hemem-bootstrap --example error_breakdown -- FGb [seed] [complex]   (or test-FGb, …)
//! ```
//!
//! Without a seed the keys and encryption randomness come from the OS.
//! Test presets run in seconds; real ones take minutes and gigabytes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;

use hemem_bootstrap::eval_mod::EvalMod;
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, Bootstrapper, Stage};
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{seed32, seeded_rng, unit_disk, unit_interval};
use num_complex::Complex64;

fn max_error(a: &[Complex64], b: &[Complex64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max)
}

fn bits(e: f64) -> String {
    format!("2^{:.2}", e.log2())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let preset: Preset = args
        .first()
        .map_or("test-FGb", String::as_str)
        .parse()
        .expect("a preset name");
    let seed: Option<u64> = args.get(1).and_then(|s| s.parse().ok());
    let complex = args.iter().any(|a| a == "complex");
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params.clone(), DeviceSelection::Cpu).unwrap();
    let keygen = match seed {
        Some(s) => KeyGenerator::with_seed(&context, seed32(s)),
        None => KeyGenerator::new(&context).unwrap(),
    };
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let schedule = BootstrapSchedule::recommended(&params).unwrap();
    let keys = BootstrapKeys::generate(&keygen, &secret, &schedule).unwrap();
    let bootstrapper = Bootstrapper::new(&context, schedule.clone(), keys).unwrap();
    eprintln!("{preset}: keys ready");

    let slots = schedule.slots();
    let mut rng = seeded_rng(seed.unwrap_or(1) + 1000);
    let values: Vec<Complex64> = if complex {
        unit_disk(&mut rng, slots)
    } else {
        unit_interval(&mut rng, slots)
            .into_iter()
            .map(|x| Complex64::new(x, 0.0))
            .collect()
    };
    let encoder = Encoder::new(&context);
    let decryptor = Decryptor::new(&context);
    let decode = |ct: &Ciphertext| {
        encoder
            .decode(&decryptor.decrypt(ct, &secret).unwrap())
            .unwrap()
    };
    let enc = params.enc_level();
    let pt = encoder
        .encode_at(&values, enc, params.default_scale(enc).unwrap(), slots)
        .unwrap();
    let encryptor = match seed {
        Some(s) => Encryptor::with_seed(&context, seed32(s + 1)),
        None => Encryptor::new(&context).unwrap(),
    };
    let ct = encryptor.encrypt(&pt, &public).unwrap();
    let ct = Evaluator::new(&context).level_down(&ct, Level(3)).unwrap();
    let input = decode(&ct);

    let mut stages: BTreeMap<&'static str, Vec<Complex64>> = BTreeMap::new();
    let mut stc_coefficients: Vec<i64> = Vec::new();
    let mut raised_coefficients: Vec<i64> = Vec::new();
    let out = bootstrapper
        .bootstrap_observed(&ct, !complex, &mut |stage, ct| {
            let name = match stage {
                Stage::SlotToCoeff => "stc",
                Stage::ModRaise => "raised",
                Stage::SubSum => "subsum",
                Stage::CoeffToSlot => "cts",
                Stage::RealPart => "re",
                Stage::ImaginaryPart => "im",
                _ => "other",
            };
            if stage == Stage::ModRaise {
                raised_coefficients = level0_coefficients(
                    decryptor.decrypt(ct, &secret).unwrap().poly().unwrap(),
                    params.q_moduli()[0].value(),
                );
            }
            if stage == Stage::SlotToCoeff {
                stc_coefficients = level0_coefficients(
                    decryptor.decrypt(ct, &secret).unwrap().poly().unwrap(),
                    params.q_moduli()[0].value(),
                );
            }
            stages.insert(name, decode(ct));
        })
        .unwrap();
    let output = decode(&out);

    let stc = schedule.stc_dft().unwrap().apply(&input).unwrap();
    let raised = &stages["raised"];
    let cts = schedule.cts_dft().unwrap().apply(raised).unwrap();
    let eval_mod = EvalMod::new(schedule.choice.eval_mod).unwrap();
    let k = f64::from(schedule.choice.eval_mod.k);
    let c = schedule.s_x / schedule.output_scale;
    let re = &stages["re"];
    let im = stages.get("im");
    let circuit: Vec<Complex64> = (0..slots)
        .map(|j| {
            let r = eval_mod.evaluate_f64(re[j].re);
            let i = im.map_or(0.0, |im| eval_mod.evaluate_f64(im[j].re));
            Complex64::new(r, i) * c
        })
        .collect();
    let split: Vec<Complex64> = stages["cts"]
        .iter()
        .map(|v| Complex64::new(2.0 * v.re, 0.0))
        .collect();
    let project = |v: &[Complex64]| -> Vec<Complex64> {
        if complex {
            v.to_vec()
        } else {
            v.iter().map(|x| Complex64::new(x.re, 0.0)).collect()
        }
    };
    let max_abs = |v: &[Complex64]| v.iter().map(|x| x.norm()).fold(0.0, f64::max);

    println!(
        "{preset} ({} slots, {}):",
        slots,
        if complex { "complex" } else { "real" }
    );
    println!(
        "  input (level 3) vs values        {}",
        bits(max_error(&input, &values))
    );
    println!(
        "  SlotToCoeff vs its f64 DFT       {} (relative to max |.| {:.3})",
        bits(max_error(&stages["stc"], &stc)),
        max_abs(&stc)
    );
    println!("  ModRaise: max |slot| at q0       {:.3}", max_abs(raised));
    println!(
        "  CoeffToSlot vs its f64 DFT       {} (max |.| {:.3})",
        bits(max_error(&stages["cts"], &cts)),
        max_abs(&cts)
    );
    println!(
        "  real part vs 2·Re(CtS)           {}",
        bits(max_error(re, &split))
    );
    println!(
        "  output vs f64 EvalMod of its input {}",
        bits(max_error(&project(&output), &project(&circuit)))
    );
    println!(
        "  f64 EvalMod vs values            {}",
        bits(max_error(&project(&circuit), &values))
    );
    println!(
        "  output vs values (end to end)    {}",
        bits(max_error(&project(&output), &values))
    );
    // SlotToCoeff's output as coefficients against the ideal ones (its f64
    // DFT encoded at Δ0): the error each coefficient carries into ModRaise.
    let ideal = encoder
        .encode_at(&stc, Level(0), Scale(schedule.delta0), slots)
        .unwrap();
    let ideal = level0_coefficients(ideal.poly().unwrap(), params.q_moduli()[0].value());
    coefficient_report(
        "SlotToCoeff coefficients vs ideal",
        &stc_coefficients,
        &ideal,
        schedule.delta0,
    );
    // ModRaise (with SSE's two key switches) must keep every coefficient
    // modulo q0.
    coefficient_report(
        "ModRaise coefficients mod q0 vs SlotToCoeff's",
        &raised_coefficients,
        &stc_coefficients,
        schedule.delta0,
    );
    // EvalMod's input read in value units: (K·re − I)·2^ρ should be the
    // value (the coefficient over Δ0), before any approximation.
    let two_rho = 2f64.powf(schedule.rho());
    let residue = |y: f64| (k * y - (k * y).round()) * two_rho;
    let input_err: Vec<f64> = (0..slots)
        .map(|j| (residue(re[j].re) - values[j].re).abs())
        .collect();
    let worst = (0..slots)
        .max_by(|&a, &b| input_err[a].total_cmp(&input_err[b]))
        .unwrap_or(0);
    println!(
        "  EvalMod input (K·re − I)·2^ρ vs values {}",
        bits(input_err[worst])
    );
    let worst_end = (0..slots)
        .max_by(|&a, &b| {
            (output[a].re - values[a].re)
                .abs()
                .total_cmp(&(output[b].re - values[b].re).abs())
        })
        .unwrap_or(0);
    for (what, j) in [("input error", worst), ("end-to-end error", worst_end)] {
        println!(
            "  slot {j} (worst {what}): value {:.9}, K·re {:.9}, residue·2^ρ {:.9}, \
             f64 circuit {:.9}, output {:.9}",
            values[j].re,
            k * re[j].re,
            residue(re[j].re),
            circuit[j].re,
            output[j].re
        );
    }
    // The end-to-end error by the integer EvalMod reduced.
    let mut by_integer: BTreeMap<i64, (usize, f64, f64)> = BTreeMap::new();
    for j in 0..slots {
        let i = (k * re[j].re).round() as i64;
        let e = (output[j].re - values[j].re).abs();
        let ec = (output[j].re - circuit[j].re).abs();
        let entry = by_integer.entry(i).or_insert((0, 0.0, 0.0));
        entry.0 += 1;
        entry.1 = entry.1.max(e);
        entry.2 = entry.2.max(ec);
    }
    println!("  by I (real part): count, max error end to end, max error vs f64 circuit");
    for (i, (n, e, ec)) in by_integer {
        println!("    I = {i:>3}: {n:>6}  {}  {}", bits(e), bits(ec));
    }
}

/// The centred coefficients of a level-0 polynomial (one limb, `q0`).
fn level0_coefficients(
    poly: &hemem_ckks::poly::RnsPoly<hemem_ckks::poly::Ntt>,
    q0: u64,
) -> Vec<i64> {
    let words = poly
        .try_clone()
        .unwrap()
        .into_coeff()
        .unwrap()
        .to_words()
        .unwrap();
    let n = words.len() / poly.limb_count();
    words[..n]
        .iter()
        .map(|&w| {
            if w > q0 / 2 {
                w as i64 - q0 as i64
            } else {
                w as i64
            }
        })
        .collect()
}

/// Prints the RMS and largest difference of two coefficient vectors over
/// `delta` (value units), and the constant coefficient's.
fn coefficient_report(what: &str, got: &[i64], want: &[i64], delta: f64) {
    let diffs: Vec<f64> = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b) as f64 / delta)
        .collect();
    let (worst_c, worst_d) = diffs
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
        .map(|(i, d)| (i, *d))
        .unwrap_or((0, 0.0));
    let rms = (diffs.iter().map(|d| d * d).sum::<f64>() / diffs.len() as f64).sqrt();
    println!(
        "  {what}: rms {}, max {} at coefficient {worst_c}, coefficient 0: {}",
        bits(rms),
        bits(worst_d.abs()),
        bits(diffs.first().copied().unwrap_or(0.0).abs())
    );
}
