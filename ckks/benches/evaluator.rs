//! Evaluator benchmarks on the CPU backend at FGb, at the top user level (12)
//! and at level 3. Ids: `<op>/FGb-L<level>/cpu`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::Sampler;
use num_complex::Complex64;

const HOISTED: i64 = 16;

fn evaluator(c: &mut Criterion) {
    let context = Context::from_preset(Preset::FGb).unwrap();
    let keygen = KeyGenerator::with_seed(&context, [5; 32]);
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let request = KeySetRequest {
        relinearization: true,
        conjugation: true,
        rotations: (1..=HOISTED).collect(),
        ..Default::default()
    };
    let keys = keygen.key_set(&secret, &request).unwrap();
    let eval = Evaluator::with_keys(&context, Arc::new(keys));
    let encoder = Encoder::new(&context);
    let encryptor = Encryptor::with_seed(&context, [6; 32]);
    let mut sampler = Sampler::from_seed([7; 32]);
    let values: Vec<Complex64> = (0..context.params().slots())
        .map(|_| Complex64::new(sampler.uniform_f64() - 0.5, sampler.uniform_f64() - 0.5))
        .collect();
    let top = encryptor
        .encrypt(&encoder.encode(&values).unwrap(), &public)
        .unwrap();
    let low = Evaluator::new(&context).level_down(&top, Level(3)).unwrap();
    let steps: Vec<i64> = (1..=HOISTED).collect();

    let mut group = c.benchmark_group("evaluator");
    group.sample_size(10);
    for (name, ct) in [("FGb-L12", &top), ("FGb-L3", &low)] {
        group.bench_function(format!("mult_relin_rescale/{name}/cpu"), |b| {
            b.iter(|| eval.mult(ct, ct).unwrap())
        });
        group.bench_function(format!("rotate/{name}/cpu"), |b| {
            b.iter(|| eval.rotate(ct, 1).unwrap())
        });
        group.bench_function(format!("conjugate/{name}/cpu"), |b| {
            b.iter(|| eval.conjugate(ct).unwrap())
        });
        group.bench_function(format!("hoisted_rotate_16/{name}/cpu"), |b| {
            b.iter(|| eval.rotate_hoisted(ct, &steps).unwrap())
        });
        group.bench_function(format!("rescale/{name}/cpu"), |b| {
            let wide = eval.mult_without_rescale(ct, ct).unwrap();
            b.iter(|| eval.rescale(&wide).unwrap())
        });
        group.bench_function(format!("add/{name}/cpu"), |b| {
            b.iter(|| eval.add(ct, ct).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, evaluator);
criterion_main!(benches);
