//! Time per bootstrapping stage, from the stage hook:
//!
//! ```text
//! cargo run --release -p hemem-bootstrap --example stage_times -- FGb [iterations] [cpu|gpu] [auto|single|double]
//! ```
//!
//! The last argument is the linear transforms' hoisting
//! (`hemem_bootstrap::hoisting::Hoisting`, default auto).
//!
//! On the GPU the hook synchronises the device at each stage boundary, so
//! each figure is the stage's device time (plus one synchronisation).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use hemem_bootstrap::hoisting::Hoisting;
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, BootstrapOptions, Bootstrapper};
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{seed32, seeded_rng, unit_interval};
use num_complex::Complex64;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let preset: Preset = args
        .first()
        .map_or("test-FGb", String::as_str)
        .parse()
        .expect("a preset name");
    let iterations: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2);
    let device = match args.get(2).map(String::as_str) {
        Some("gpu") => DeviceSelection::Gpu(0),
        _ => DeviceSelection::Cpu,
    };
    let hoisting: Hoisting = args
        .get(3)
        .map_or("auto", String::as_str)
        .parse()
        .expect("auto, single or double");
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    // HEMEM_* variables steer the memory system on the GPU.
    let memory = MemoryConfig::from_env().unwrap();
    let context = Context::with_memory(params.clone(), device, &memory).unwrap();
    let keygen = KeyGenerator::with_seed(&context, seed32(1));
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let t = Instant::now();
    let schedule = BootstrapSchedule::recommended(&params).unwrap();
    let keys = BootstrapKeys::generate(&keygen, &secret, &schedule).unwrap();
    let keys_s = t.elapsed().as_secs_f64();
    let options = BootstrapOptions {
        hoisting,
        ..BootstrapOptions::default()
    };
    let bootstrapper =
        Bootstrapper::with_options(&context, schedule.clone(), keys, options).unwrap();
    let enc = params.enc_level();
    bootstrapper
        .prepare_for_scale(params.default_scale(enc).unwrap())
        .unwrap();
    println!(
        "{preset} ({} hoisting): keys {keys_s:.1} s, keys and diagonals {:.1} s",
        hoisting.name(),
        t.elapsed().as_secs_f64()
    );
    let values: Vec<Complex64> = unit_interval(&mut seeded_rng(2), schedule.slots())
        .into_iter()
        .map(|x| Complex64::new(x, 0.0))
        .collect();
    let pt = Encoder::new(&context)
        .encode_at(
            &values,
            enc,
            params.default_scale(enc).unwrap(),
            values.len(),
        )
        .unwrap();
    let ct = Encryptor::with_seed(&context, seed32(3))
        .encrypt(&pt, &public)
        .unwrap();
    let ct = Evaluator::new(&context).level_down(&ct, Level(3)).unwrap();
    for _ in 0..iterations {
        let start = Instant::now();
        let mut last = start;
        let mut line = String::new();
        bootstrapper
            .bootstrap_observed(&ct, true, &mut |stage, _| {
                context.synchronize().unwrap();
                let now = Instant::now();
                line.push_str(&format!(
                    " {stage:?} {:.1} ms,",
                    (now - last).as_secs_f64() * 1e3
                ));
                last = now;
            })
            .unwrap();
        context.synchronize().unwrap();
        let now = Instant::now();
        println!(
            "total {:.1} ms:{line} EvalMod and the rest {:.1} ms",
            (now - start).as_secs_f64() * 1e3,
            (now - last).as_secs_f64() * 1e3
        );
    }
}
