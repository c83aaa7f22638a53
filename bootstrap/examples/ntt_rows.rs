//! The NTT's rows-phase kernels, 8 points per thread (`radix8`, the old
//! path) against 16 (`radix16`), timed alternately in one process with the
//! same data and keys (`Backend::set_ntt_rows`), so that both see the same
//! machine state:
//!
//! 1. forward and inverse NTT of the top level's limbs (25 × 2^16 for FGb);
//! 2. mult + relinearise and rotate at the top level;
//! 3. whole bootstraps (real slots), with the time of each stage.
//!
//! Each figure is the median over rounds of one variant's mean per
//! iteration; outputs of both variants are compared (they must be equal).
//!
//! ```text
//! HEMEM_MEMORY_POLICY=device cargo run --release -p hemem-bootstrap --example ntt_rows -- FGb [rounds] [gpu|cpu] [bootstraps]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::Instant;

use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, BootstrapOptions, Bootstrapper};
use hemem_ckks::backend::{Backend, NttRows};
use hemem_ckks::poly::{Coeff, RnsPoly};
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{seed32, seeded_rng, unit_disk, unit_interval};
use hemem_memory::MemoryClass;
use num_complex::Complex64;
use rand_core::Rng;

const VARIANTS: [NttRows; 2] = [NttRows::Radix8, NttRows::Radix16];

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Per variant, the median over `rounds` of the mean time of `iterations`
/// calls of `op` (in ms); variants alternate within each round, and a
/// round 0 warms up.
fn alternate(
    backend: &Arc<dyn Backend>,
    rounds: usize,
    iterations: usize,
    mut op: impl FnMut() -> hemem_ckks::Result<()>,
) -> [f64; 2] {
    let mut times = [Vec::new(), Vec::new()];
    for round in 0..=rounds {
        for (i, &rows) in VARIANTS.iter().enumerate() {
            backend.set_ntt_rows(rows);
            backend.synchronize().unwrap();
            let t = Instant::now();
            for _ in 0..iterations {
                op().unwrap();
            }
            backend.synchronize().unwrap();
            if round > 0 {
                times[i].push(t.elapsed().as_secs_f64() * 1e3 / iterations as f64);
            }
        }
    }
    backend.set_ntt_rows(NttRows::Radix8);
    [median(&times[0]), median(&times[1])]
}

fn report(what: &str, [old, new]: [f64; 2], unit_us: bool) {
    let (scale, unit) = if unit_us { (1e3, "µs") } else { (1.0, "ms") };
    println!(
        "{what}: radix8 {:.3} {unit}, radix16 {:.3} {unit}, radix16/radix8 = {:.3}",
        old * scale,
        new * scale,
        new / old
    );
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
        Some("cpu") => DeviceSelection::Cpu,
        _ => DeviceSelection::Gpu(0),
    };
    let bootstraps: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    let memory = MemoryConfig::from_env().unwrap();
    let context = Context::with_memory(params.clone(), device, &memory).unwrap();
    let backend = Arc::clone(context.backend());
    let n = params.degree().get();
    let top = params.max_level();
    let q: Vec<usize> = (0..top.primes()).collect();
    println!(
        "{preset} on {:?}: N = 2^{}, top level {} ({} limbs), {rounds} rounds",
        backend.device(),
        n.trailing_zeros(),
        top.0,
        q.len()
    );

    // 1. The NTT alone, over every top-level limb, both directions; the
    // two variants' outputs compared.
    let mut rng = seeded_rng(7);
    let words: Vec<u64> = q
        .iter()
        .flat_map(|&i| {
            let p = params.q_moduli()[i].value();
            (0..n).map(|_| rng.next_u64() % p).collect::<Vec<_>>()
        })
        .collect();
    let mut outputs = Vec::new();
    for rows in VARIANTS {
        backend.set_ntt_rows(rows);
        let mut p =
            RnsPoly::<Coeff>::from_words(&backend, &q, MemoryClass::Temporary, &words).unwrap();
        backend.ntt_forward(p.limbs_mut().unwrap()).unwrap();
        let forward = p.to_words().unwrap();
        backend.ntt_inverse(p.limbs_mut().unwrap()).unwrap();
        outputs.push((forward, p.to_words().unwrap()));
    }
    assert!(outputs[0] == outputs[1], "radix8 and radix16 NTTs differ");
    assert!(
        outputs[0].1 == words,
        "the NTT round trip is not the identity"
    );
    println!("NTT outputs: radix8 == radix16 (forward and inverse), round trip exact");
    let mut p = RnsPoly::<Coeff>::from_words(&backend, &q, MemoryClass::Temporary, &words).unwrap();
    let label = format!("{}x2^{}", q.len(), n.trailing_zeros());
    let t = alternate(&backend, rounds, 50, || backend.ntt_forward(p.limbs_mut()?));
    report(&format!("ntt_forward/{label}"), t, true);
    let t = alternate(&backend, rounds, 50, || backend.ntt_inverse(p.limbs_mut()?));
    report(&format!("ntt_inverse/{label}"), t, true);

    // 2. mult + relinearise and rotate at the top level.
    let keygen = KeyGenerator::with_seed(&context, seed32(1));
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    {
        let request = KeySetRequest {
            relinearization: true,
            rotations: vec![1],
            ..Default::default()
        };
        let keys = keygen.key_set(&secret, &request).unwrap();
        let eval = Evaluator::with_keys(&context, Arc::new(keys))
            .with_output_class(MemoryClass::Temporary);
        let values = unit_disk(&mut seeded_rng(2), params.slots());
        let pt = Encoder::new(&context)
            .encode_at(
                &values,
                top,
                params.default_scale(top).unwrap(),
                params.slots(),
            )
            .unwrap();
        let ct = Encryptor::with_seed(&context, seed32(3))
            .encrypt(&pt, &public)
            .unwrap();
        let mut same = Vec::new();
        for rows in VARIANTS {
            backend.set_ntt_rows(rows);
            let m = eval.mult_without_rescale(&ct, &ct).unwrap();
            let r = eval.rotate(&ct, 1).unwrap();
            same.push((
                m.parts().0.to_words().unwrap(),
                m.parts().1.to_words().unwrap(),
                r.parts().0.to_words().unwrap(),
                r.parts().1.to_words().unwrap(),
            ));
        }
        assert!(same[0] == same[1], "radix8 and radix16 key switches differ");
        println!("mult_relin and rotate outputs: radix8 == radix16");
        let t = alternate(&backend, rounds, 20, || {
            eval.mult_without_rescale(&ct, &ct).map(drop)
        });
        report("mult_relin (top level)", t, false);
        let t = alternate(&backend, rounds, 20, || eval.rotate(&ct, 1).map(drop));
        report("rotate (top level)", t, false);
    }

    // 3. Whole bootstraps, alternated, with stage times.
    if bootstraps == 0 {
        return;
    }
    let t = Instant::now();
    let schedule = BootstrapSchedule::recommended(&params).unwrap();
    let keys = BootstrapKeys::generate(&keygen, &secret, &schedule).unwrap();
    let bootstrapper = Bootstrapper::with_options(
        &context,
        schedule.clone(),
        keys,
        BootstrapOptions::default(),
    )
    .unwrap();
    let enc = params.enc_level();
    bootstrapper
        .prepare_for_scale(params.default_scale(enc).unwrap())
        .unwrap();
    println!(
        "bootstrap keys and diagonals {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let values: Vec<Complex64> = unit_interval(&mut seeded_rng(4), schedule.slots())
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
    let ct = Encryptor::with_seed(&context, seed32(5))
        .encrypt(&pt, &public)
        .unwrap();
    let ct = Evaluator::new(&context).level_down(&ct, Level(3)).unwrap();
    let mut totals = [Vec::new(), Vec::new()];
    let mut first: Option<(Vec<u64>, Vec<u64>)> = None;
    for round in 0..=bootstraps {
        for (i, &rows) in VARIANTS.iter().enumerate() {
            backend.set_ntt_rows(rows);
            context.synchronize().unwrap();
            let start = Instant::now();
            let mut last = start;
            let mut line = String::new();
            let out = bootstrapper
                .bootstrap_observed(&ct, true, &mut |stage, _| {
                    context.synchronize().unwrap();
                    let now = Instant::now();
                    line.push_str(&format!(
                        " {stage:?} {:.1},",
                        (now - last).as_secs_f64() * 1e3
                    ));
                    last = now;
                })
                .unwrap();
            context.synchronize().unwrap();
            let ms = start.elapsed().as_secs_f64() * 1e3;
            let words = (
                out.parts().0.to_words().unwrap(),
                out.parts().1.to_words().unwrap(),
            );
            match &first {
                None => first = Some(words),
                Some(w) => assert!(*w == words, "bootstrap outputs differ ({})", rows.name()),
            }
            if round > 0 {
                totals[i].push(ms);
            }
            println!(
                "bootstrap {} round {round}: {ms:.1} ms:{line} rest {:.1} ms",
                rows.name(),
                last.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    backend.set_ntt_rows(NttRows::Radix8);
    println!("bootstrap outputs: radix8 == radix16 in every round");
    report(
        &format!("bootstrap {preset} (median of {bootstraps})"),
        [median(&totals[0]), median(&totals[1])],
        false,
    );
}
