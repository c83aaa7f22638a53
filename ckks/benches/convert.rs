//! Base-conversion benchmarks on the CPU: FGb's ModUp of one digit (5
//! source primes to the 25 other primes of `Q_l ∪ P`, approximate) and its
//! ModDown (the 5 special primes to the 25 of `Q`, exact), N = 2^16, whose
//! sums fit the narrow (Montgomery) path; and FVb's ModDown (its 10 61-bit
//! special primes to the 30 of `Q`, exact), N = 2^17, on the wide path.
//! Ids: `convert/<kind>/<from>to<to>x2^<log N>/cpu`. Run one-threaded
//! (`RAYON_NUM_THREADS=1`) to compare with the one-thread bootstrap.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    missing_docs
)]

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hemem_ckks::params::{Parameters, Preset};
use hemem_ckks::rns::BaseConverter;
use hemem_ckks::sampling::Sampler;

fn convert(c: &mut Criterion) {
    let params = Parameters::from_preset(Preset::FGb).unwrap();
    let all = params.all_moduli();
    let q_count = params.q_moduli().len();
    let fv = Parameters::from_preset(Preset::FVb).unwrap();
    let fv_all = fv.all_moduli();
    let fv_q = fv.q_moduli().len();
    let mut sampler = Sampler::from_seed([2; 32]);
    let mut group = c.benchmark_group("convert");
    // ModUp: the first digit's 5 primes to the other 20 of Q and the 5 of P.
    // ModDown: P to Q.
    let up_from: Vec<_> = all[..5].to_vec();
    let up_to: Vec<_> = all[5..].to_vec();
    let down_from: Vec<_> = all[q_count..].to_vec();
    let down_to: Vec<_> = all[..q_count].to_vec();
    let (n, fv_n) = (params.degree().get(), fv.degree().get());
    for (kind, from, to, exact, n) in [
        ("mod_up", up_from, up_to, false, n),
        ("mod_down", down_from, down_to, true, n),
        (
            "mod_down",
            fv_all[fv_q..].to_vec(),
            fv_all[..fv_q].to_vec(),
            true,
            fv_n,
        ),
    ] {
        let conv = BaseConverter::new(&from, &to).unwrap();
        let input: Vec<Vec<u64>> = from
            .iter()
            .map(|q| (0..n).map(|_| sampler.uniform_mod(q.value())).collect())
            .collect();
        let mut output = vec![vec![0u64; n]; to.len()];
        let id = format!("{}to{}x2^{}/cpu", from.len(), to.len(), n.trailing_zeros());
        group.bench_function(BenchmarkId::new(kind, &id), |b| {
            b.iter(|| {
                let limbs: Vec<&[u64]> = input.iter().map(Vec::as_slice).collect();
                let mut outs: Vec<&mut [u64]> = output.iter_mut().map(Vec::as_mut_slice).collect();
                if exact {
                    conv.convert_centered(&limbs, &mut outs).unwrap();
                } else {
                    conv.convert_approx(&limbs, &mut outs).unwrap();
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, convert);
criterion_main!(benches);
