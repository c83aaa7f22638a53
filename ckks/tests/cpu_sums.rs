//! The CPU backend's fused sums against plain `u128` modular arithmetic,
//! term by term: `mul_sum` (products summed in 128 bits, reduced once per
//! eight terms) must give the sequential modular sum, at FGb's primes and at
//! 61- and 62-bit ones (where eight products exceed `q·2^64`), with every
//! operand at its largest value somewhere.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Arc;

use hemem_ckks::backend::{Backend, CpuBackend};
use hemem_ckks::params::{Parameters, Preset};
use hemem_ckks::poly::{Ntt, RnsPoly};
use hemem_ckks::testing::seeded_rng;
use hemem_ckks::zq::Modulus;
use hemem_ckks::zq::primes::PrimeGenerator;
use hemem_memory::MemoryClass;
use rand_core::Rng;

#[test]
fn cpu_mul_sum_is_the_sequential_modular_sum() {
    let params = Parameters::from_preset(Preset::FGb).unwrap();
    let n = 1 << 10;
    // FGb's primes, and two each of 61 and 62 bits: with 62-bit primes
    // eight products exceed `q·2^64`.
    let mut all = params.all_moduli();
    for bits in [61, 62] {
        all.extend(
            PrimeGenerator::new(bits, 2 * n as u64)
                .take(2)
                .map(|p| Modulus::new(p).unwrap()),
        );
    }
    assert!(all.iter().any(|q| 8 * u128::from(q.value()) > 1u128 << 64));
    let backend: Arc<dyn Backend> = Arc::new(CpuBackend::new(n, &all).unwrap());
    let moduli: Vec<usize> = (0..all.len()).collect();
    let seed = 0x5u64;
    let mut rng = seeded_rng(seed);
    // Random residues, with the first coefficients of every limb at q − 1.
    let words = |rng: &mut rand_chacha::ChaCha20Rng| -> Vec<u64> {
        all.iter()
            .flat_map(|q| {
                let q = q.value();
                (0..n)
                    .map(|i| if i < 4 { q - 1 } else { rng.next_u64() % q })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let poly = |w: &[u64]| {
        RnsPoly::<Ntt>::from_words(&backend, &moduli, MemoryClass::Temporary, w).unwrap()
    };
    for count in [1usize, 3, 8, 9, 17] {
        for accumulate in [false, true] {
            let acc_words = words(&mut rng);
            let terms: Vec<(Vec<u64>, Vec<u64>)> = (0..count)
                .map(|_| (words(&mut rng), words(&mut rng)))
                .collect();
            let polys: Vec<(RnsPoly<Ntt>, RnsPoly<Ntt>)> =
                terms.iter().map(|(a, b)| (poly(a), poly(b))).collect();
            let refs: Vec<(&RnsPoly<Ntt>, &RnsPoly<Ntt>)> =
                polys.iter().map(|(a, b)| (a, b)).collect();
            let got = if accumulate {
                let mut acc = poly(&acc_words);
                acc.mul_sum_assign(&refs).unwrap();
                acc
            } else {
                RnsPoly::mul_sum(&refs, MemoryClass::Temporary).unwrap()
            }
            .to_words()
            .unwrap();
            for (limb, q) in all.iter().enumerate() {
                let q = u128::from(q.value());
                for c in 0..n {
                    let i = limb * n + c;
                    let mut want = if accumulate {
                        u128::from(acc_words[i])
                    } else {
                        0
                    };
                    for (a, b) in &terms {
                        want = (want + u128::from(a[i]) * u128::from(b[i]) % q) % q;
                    }
                    assert_eq!(
                        u128::from(got[i]),
                        want,
                        "seed {seed}: {count} terms, accumulate {accumulate}, limb {limb}, coefficient {c}"
                    );
                }
            }
        }
    }
}

/// The key switch's inner product over more digits than 128 bits hold
/// products of: 70 digits at 61-bit primes, every operand at `q − 1` in
/// part of each limb (70·(q − 1)² passes 2^128), against the sequential
/// modular sum. No preset comes near (FGb has five digits), but a custom
/// chain of many small primes may.
#[test]
fn cpu_inner_product_of_many_digits_is_the_sequential_modular_sum() {
    let n = 1 << 10;
    let all: Vec<Modulus> = PrimeGenerator::new(61, 2 * n as u64)
        .take(2)
        .map(|p| Modulus::new(p).unwrap())
        .collect();
    let backend: Arc<dyn Backend> = Arc::new(CpuBackend::new(n, &all).unwrap());
    let moduli: Vec<usize> = (0..all.len()).collect();
    let mut rng = seeded_rng(0x6);
    let mut words = || -> Vec<u64> {
        all.iter()
            .flat_map(|q| {
                let q = q.value();
                (0..n)
                    .map(|i| if i < n / 4 { q - 1 } else { rng.next_u64() % q })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let digits = 70;
    let d: Vec<Vec<u64>> = (0..digits).map(|_| words()).collect();
    let b: Vec<Vec<u64>> = (0..digits).map(|_| words()).collect();
    let a: Vec<Vec<u64>> = (0..digits).map(|_| words()).collect();
    let poly = |w: &[u64]| {
        RnsPoly::<Ntt>::from_words(&backend, &moduli, MemoryClass::Temporary, w).unwrap()
    };
    let (dp, bp, ap): (Vec<_>, Vec<_>, Vec<_>) = (
        d.iter().map(|w| poly(w)).collect(),
        b.iter().map(|w| poly(w)).collect(),
        a.iter().map(|w| poly(w)).collect(),
    );
    fn views(ps: &[RnsPoly<Ntt>]) -> Vec<hemem_ckks::backend::Limbs<'_>> {
        ps.iter().map(|p| p.limbs().unwrap()).collect()
    }
    let mut out0 = RnsPoly::<Ntt>::zero(&backend, &moduli, MemoryClass::Temporary).unwrap();
    let mut out1 = RnsPoly::<Ntt>::zero(&backend, &moduli, MemoryClass::Temporary).unwrap();
    backend
        .key_switch_inner_product(
            &views(&dp),
            &views(&bp),
            &views(&ap),
            out0.limbs_mut().unwrap(),
            out1.limbs_mut().unwrap(),
        )
        .unwrap();
    let (got0, got1) = (out0.to_words().unwrap(), out1.to_words().unwrap());
    for (limb, q) in all.iter().enumerate() {
        let q = u128::from(q.value());
        for c in 0..n {
            let i = limb * n + c;
            let (mut want0, mut want1) = (0u128, 0u128);
            for t in 0..digits {
                want0 = (want0 + u128::from(d[t][i]) * u128::from(b[t][i]) % q) % q;
                want1 = (want1 + u128::from(d[t][i]) * u128::from(a[t][i]) % q) % q;
            }
            assert_eq!(u128::from(got0[i]), want0, "limb {limb}, coefficient {c}");
            assert_eq!(u128::from(got1[i]), want1, "limb {limb}, coefficient {c}");
        }
    }
}
