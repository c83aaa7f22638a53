//! Twiddle tables for the staged (Cooley–Tukey / Gentleman–Sande) negacyclic
//! NTT that the GPU kernels run, built from the ψ of [`NttPlan`] so both
//! backends share one root and one output order, plus a host implementation
//! of exactly the kernels' arithmetic (lazy Harvey butterflies) that tests
//! compare with concrete-ntt.
//!
//! Forward (natural → bit-reversed): for `m = 1, 2, 4, …, N/2`, groups
//! `i < m` of stride `t = N/(2m)` use `W = ψ^{bitrev(m+i)}`:
//! `(X, Y) ↦ (X + W·Y, X − W·Y)`. Inverse (bit-reversed → natural): for
//! `m = N/2, …, 1`, `W = ψ^{−bitrev(m+i)}`: `(X, Y) ↦ (X + Y, (X − Y)·W)`, then
//! multiplication by `N^{−1}` (Longa–Naehrig 2016; Harvey 2014 for the lazy
//! reduction).

use super::{NttPlan, bit_reverse};
use crate::zq::{Modulus, ShoupConstant};

/// Twiddles of one prime, in the order the staged transforms read them.
#[derive(Clone, Debug)]
pub struct TwiddleTables {
    /// `ψ^{bitrev(k)}`, `k < N`.
    pub forward: Vec<ShoupConstant>,
    /// `ψ^{−bitrev(k)}`, `k < N`.
    pub inverse: Vec<ShoupConstant>,
    /// `N^{−1}`.
    pub n_inv: ShoupConstant,
}

impl TwiddleTables {
    /// Tables for `plan`'s prime and root.
    pub fn new(plan: &NttPlan) -> Self {
        let m = *plan.modulus();
        let n = plan.degree();
        let bits = n.trailing_zeros();
        let psi = plan.psi();
        let psi_inv = m.inv(psi).unwrap_or(0);
        let mut powers = vec![1u64; n];
        let mut inv_powers = vec![1u64; n];
        for k in 1..n {
            let (prev, prev_inv) = (
                powers.get(k - 1).copied().unwrap_or(1),
                inv_powers.get(k - 1).copied().unwrap_or(1),
            );
            if let (Some(p), Some(q)) = (powers.get_mut(k), inv_powers.get_mut(k)) {
                *p = m.mul(prev, psi);
                *q = m.mul(prev_inv, psi_inv);
            }
        }
        let pick = |table: &[u64], k: usize| {
            m.shoup(table.get(bit_reverse(k, bits)).copied().unwrap_or(0))
        };
        Self {
            forward: (0..n).map(|k| pick(&powers, k)).collect(),
            inverse: (0..n).map(|k| pick(&inv_powers, k)).collect(),
            n_inv: m.shoup(m.inv(n as u64).unwrap_or(0)),
        }
    }
}

/// The forward transform exactly as the GPU computes it (values kept in
/// `[0, 4q)` between stages), for tests.
pub fn forward_staged(a: &mut [u64], tables: &TwiddleTables, m: &Modulus) {
    let n = a.len();
    let q = m.value();
    let (two_q, four_q) = (2 * q, 4 * q);
    let mut groups = 1;
    while groups < n {
        let t = n / (2 * groups);
        for i in 0..groups {
            let w = tables
                .forward
                .get(groups + i)
                .copied()
                .unwrap_or(ShoupConstant::default());
            for j in 2 * i * t..2 * i * t + t {
                let (x, y) = (
                    a.get(j).copied().unwrap_or(0),
                    a.get(j + t).copied().unwrap_or(0),
                );
                let x = if x >= two_q { x - two_q } else { x };
                let v = m.mul_shoup_lazy(y, &w);
                if let Some(s) = a.get_mut(j) {
                    *s = x + v;
                }
                if let Some(s) = a.get_mut(j + t) {
                    *s = x + two_q - v;
                }
            }
        }
        groups *= 2;
    }
    for v in a.iter_mut() {
        let mut x = *v;
        if x >= two_q {
            x -= two_q;
        }
        if x >= q {
            x -= q;
        }
        debug_assert!(*v < four_q);
        *v = x;
    }
}

/// The inverse transform exactly as the GPU computes it (values kept in
/// `[0, 2q)` between stages), for tests.
pub fn inverse_staged(a: &mut [u64], tables: &TwiddleTables, m: &Modulus) {
    let n = a.len();
    let q = m.value();
    let two_q = 2 * q;
    let mut groups = n / 2;
    while groups >= 1 {
        let t = n / (2 * groups);
        for i in 0..groups {
            let w = tables
                .inverse
                .get(groups + i)
                .copied()
                .unwrap_or(ShoupConstant::default());
            for j in 2 * i * t..2 * i * t + t {
                let (x, y) = (
                    a.get(j).copied().unwrap_or(0),
                    a.get(j + t).copied().unwrap_or(0),
                );
                let s = x + y;
                let s = if s >= two_q { s - two_q } else { s };
                let d = m.mul_shoup_lazy(x + two_q - y, &w);
                if let Some(v) = a.get_mut(j) {
                    *v = s;
                }
                if let Some(v) = a.get_mut(j + t) {
                    *v = d;
                }
            }
        }
        groups /= 2;
    }
    for v in a.iter_mut() {
        *v = m.mul_shoup(*v, &tables.n_inv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::seeded_rng;
    use crate::zq::primes::PrimeGenerator;
    use rand_core::Rng;

    /// Every prime of every HEaaN preset: the library transform (tfhe-ntt,
    /// or the concrete-ntt fallback where tfhe-ntt's IFMA path fails) agrees
    /// with the staged reference built from its ψ.
    #[test]
    fn preset_primes_transform_like_the_staged_reference() {
        use crate::params::{Parameters, Preset};
        let mut fallbacks = 0;
        for preset in [Preset::FVb, Preset::FGb, Preset::FTa] {
            let params = Parameters::from_preset(preset).unwrap();
            let n = params.degree().get();
            for m in params.all_moduli() {
                let plan = NttPlan::new(n, m).unwrap();
                fallbacks += usize::from(plan.is_fallback());
                let tables = TwiddleTables::new(&plan);
                let mut rng = seeded_rng(m.value());
                let a: Vec<u64> = (0..n).map(|_| rng.next_u64() % m.value()).collect();
                let (mut expected, mut got) = (a.clone(), a.clone());
                plan.forward(&mut expected).unwrap();
                forward_staged(&mut got, &tables, &m);
                assert_eq!(got, expected, "{preset}, q = {}", m.value());
                plan.inverse(&mut expected).unwrap();
                assert_eq!(expected, a, "{preset}, q = {}: round trip", m.value());
            }
        }
        println!("{fallbacks} primes on the fallback transform");
    }

    #[test]
    fn staged_transforms_match_the_library() {
        for (log_n, bits) in [
            (4u32, 30u32),
            (10, 42),
            (12, 58),
            (13, 61),
            (16, 42),
            (17, 61),
            (17, 51),
            (16, 60),
            (15, 36),
        ] {
            let n = 1usize << log_n;
            let q = PrimeGenerator::new(bits, 2 * n as u64).next().unwrap();
            let m = Modulus::new(q).unwrap();
            let plan = NttPlan::new(n, m).unwrap();
            let tables = TwiddleTables::new(&plan);
            let mut rng = seeded_rng(u64::from(log_n));
            let a: Vec<u64> = (0..n).map(|_| rng.next_u64() % q).collect();
            let (mut expected, mut got) = (a.clone(), a.clone());
            plan.forward(&mut expected).unwrap();
            forward_staged(&mut got, &tables, &m);
            assert_eq!(got, expected, "forward, N = 2^{log_n}, {bits}-bit prime");
            inverse_staged(&mut got, &tables, &m);
            assert_eq!(got, a, "inverse, N = 2^{log_n}");
        }
    }
}
