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
use hemem_bootstrap::schedule::{BootstrapSchedule, recommended_choice};
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
    let schedule =
        BootstrapSchedule::new(&params, recommended_choice(preset.shape_of()), None).unwrap();
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
