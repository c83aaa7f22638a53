//! CoeffToSlot with single and double hoisting, timed alternately in one
//! process (so that a loaded machine slows both alike), with the same keys,
//! input and compact diagonals:
//!
//! ```text
//! cargo run --release -p hemem-bootstrap --example cts_hoisting -- FTb [rounds] [cpu|gpu]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::Instant;

use hemem_bootstrap::coeff_to_slot::coeff_to_slot;
use hemem_bootstrap::linear_transform::{DiagonalStorage, Hoisting};
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, CkksOps};
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{seed32, seeded_rng, unit_disk};
use num_complex::Complex64;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let preset: Preset = args
        .first()
        .map_or("test-FGb", String::as_str)
        .parse()
        .expect("a preset name");
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let device = match args.get(2).map(String::as_str) {
        Some("gpu") => DeviceSelection::Gpu(0),
        _ => DeviceSelection::Cpu,
    };
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params.clone(), device).unwrap();
    let keygen = KeyGenerator::with_seed(&context, seed32(1));
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let schedule = BootstrapSchedule::recommended(&params).unwrap();
    let keys = BootstrapKeys::generate(&keygen, &secret, &schedule).unwrap();
    let evaluator = Evaluator::with_keys(&context, Arc::clone(keys.key_set()))
        .with_output_class(hemem_memory::MemoryClass::Temporary);
    let ops = CkksOps::new(&evaluator);
    let top = schedule.top_level;
    let q0 = params.q_moduli()[0].value() as f64;
    let w: Vec<Complex64> = unit_disk(&mut seeded_rng(2), schedule.slots())
        .into_iter()
        .map(|v| v * 8.0)
        .collect();
    let pt = Encoder::new(&context)
        .encode_at(&w, Level(top), Scale(q0), w.len())
        .unwrap();
    let ct = Encryptor::with_seed(&context, seed32(3))
        .encrypt(&pt, &public)
        .unwrap();
    let dft = schedule.cts_dft().unwrap();
    let encoded: Vec<_> = [Hoisting::Single, Hoisting::Double]
        .into_iter()
        .map(|h| {
            dft.encode_hoisted(
                &ops,
                top,
                &schedule.cts_diagonal_scales,
                schedule.log_bsgs_ratio,
                DiagonalStorage::Compact,
                h,
            )
            .unwrap()
        })
        .collect();
    let mut times = [Vec::new(), Vec::new()];
    for round in 0..=rounds {
        for (i, e) in encoded.iter().enumerate() {
            let t = Instant::now();
            let out = coeff_to_slot(&ops, &ct, e).unwrap();
            context.synchronize().unwrap();
            let ms = t.elapsed().as_secs_f64() * 1e3;
            drop(out);
            // Round 0 warms up (first touches, caches).
            if round > 0 {
                times[i].push(ms);
            }
        }
    }
    let [mut single, mut double] = times;
    println!(
        "{preset} CoeffToSlot ({rounds} alternating rounds, {device:?}): single {:.1} ms {single:.1?}, double {:.1} ms {double:.1?}",
        median(&mut single.clone()),
        median(&mut double.clone()),
    );
    let ratio = median(&mut double) / median(&mut single);
    println!("double / single = {ratio:.3}");
}
