//! Encode, encrypt and decrypt at FGb on the CPU backend. Ids:
//! `<op>/FGb/cpu`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    missing_docs
)]

use criterion::{Criterion, criterion_group, criterion_main};
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::Sampler;
use num_complex::Complex64;

fn encryption(c: &mut Criterion) {
    let context = Context::from_preset(Preset::FGb).unwrap();
    let keygen = KeyGenerator::with_seed(&context, [2; 32]);
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let encoder = Encoder::new(&context);
    let encryptor = Encryptor::with_seed(&context, [3; 32]);
    let decryptor = Decryptor::new(&context);
    let mut sampler = Sampler::from_seed([4; 32]);
    let values: Vec<Complex64> = (0..context.params().slots())
        .map(|_| {
            Complex64::new(
                sampler.uniform_f64() * 2.0 - 1.0,
                sampler.uniform_f64() * 2.0 - 1.0,
            )
        })
        .collect();
    let pt = encoder.encode(&values).unwrap();
    let ct = encryptor.encrypt(&pt, &public).unwrap();

    let mut group = c.benchmark_group("encryption");
    group.sample_size(20);
    group.bench_function("encode/FGb/cpu", |b| {
        b.iter(|| encoder.encode(&values).unwrap())
    });
    group.bench_function("encrypt/FGb/cpu", |b| {
        b.iter(|| encryptor.encrypt(&pt, &public).unwrap())
    });
    group.bench_function("decrypt/FGb/cpu", |b| {
        b.iter(|| decryptor.decrypt(&ct, &secret).unwrap())
    });
    group.bench_function("decode/FGb/cpu", |b| {
        let dec = decryptor.decrypt(&ct, &secret).unwrap();
        b.iter(|| encoder.decode(&dec).unwrap())
    });
    group.finish();
}

criterion_group!(benches, encryption);
criterion_main!(benches);
