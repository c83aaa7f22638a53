//! NTT benchmarks on the CPU backend: N = 2^16, one limb and FGb's 25
//! top-level limbs. Ids: `ntt/<direction>/<limbs>x2^16/cpu`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hemem_ckks::backend::{Backend, CpuBackend};
use hemem_ckks::params::{Parameters, Preset};
use hemem_ckks::poly::{Coeff, RnsPoly};
use hemem_ckks::sampling::Sampler;
use hemem_memory::MemoryClass;

fn ntt(c: &mut Criterion) {
    let params = Parameters::from_preset(Preset::FGb).unwrap();
    let n = params.degree().get();
    let backend: Arc<dyn Backend> = Arc::new(CpuBackend::new(n, &params.all_moduli()).unwrap());
    let mut sampler = Sampler::from_seed([1; 32]);
    let mut group = c.benchmark_group("ntt");
    for limbs in [1usize, 25] {
        let moduli: Vec<usize> = (0..limbs).collect();
        let words: Vec<u64> = moduli
            .iter()
            .flat_map(|&i| {
                let q = params.all_moduli()[i].value();
                (0..n).map(|_| sampler.uniform_mod(q)).collect::<Vec<_>>()
            })
            .collect();
        let mut poly =
            RnsPoly::<Coeff>::from_words(&backend, &moduli, MemoryClass::Temporary, &words)
                .unwrap();
        let id = format!("{limbs}x2^16/cpu");
        group.bench_function(BenchmarkId::new("forward", &id), |b| {
            b.iter(|| backend.ntt_forward(poly.limbs_mut().unwrap()).unwrap())
        });
        group.bench_function(BenchmarkId::new("inverse", &id), |b| {
            b.iter(|| backend.ntt_inverse(poly.limbs_mut().unwrap()).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, ntt);
criterion_main!(benches);
