//! The negacyclic number-theoretic transform over `Z_q[X]/(X^N + 1)`.
//!
//! One convention serves both backends (DESIGN.md, "The seam"): the forward
//! transform maps coefficients in natural order to evaluations in
//! **bit-reversed** order, `out[j] = a(ψ^(2·bitrev(j)+1))`, with ψ the
//! primitive 2N-th root that the transform library picks for the prime. The
//! inverse is normalised (it divides by N). [`NttPlan::psi`] exposes ψ so the
//! GPU's twiddle tables are built from the very same root.
//!
//! The transforms come from tfhe-ntt (AVX-512 and IFMA paths on stable Rust,
//! about twice as fast as concrete-ntt's AVX2 path here). tfhe-ntt 0.7.1's
//! 52-bit IFMA path is wrong for some primes just below 2^51 (four of FVb's
//! 51-bit primes at N = 2^17: neither the forward transform nor the round
//! trip is right), so every plan for a prime below 2^52 is checked against
//! direct evaluation when it is made, and concrete-ntt serves the primes
//! that fail.

mod automorphism;
mod subring;
mod tables;

pub use automorphism::{
    GaloisElement, apply_automorphism_coeff, automorphism_permutation, bit_reverse,
};
pub use subring::forward_subring;
pub use tables::{TwiddleTables, forward_staged, inverse_staged};

use crate::zq::{Modulus, ShoupConstant};
use crate::{Error, Result};

/// The library transform behind a plan.
enum Engine {
    Tfhe(tfhe_ntt::prime64::Plan),
    Concrete(concrete_ntt::prime64::Plan),
}

impl Engine {
    fn fwd(&self, a: &mut [u64]) {
        match self {
            Self::Tfhe(p) => p.fwd(a),
            Self::Concrete(p) => p.fwd(a),
        }
    }

    fn inv(&self, a: &mut [u64]) {
        match self {
            Self::Tfhe(p) => p.inv(a),
            Self::Concrete(p) => p.inv(a),
        }
    }

    /// `a·N^{-1}`, canonical: tfhe-ntt's vectorised Shoup product, or
    /// `n_inv` one word at a time for the fallback (whose plans serve the
    /// primes tfhe-ntt gets wrong, so none of its code is trusted there).
    fn normalize(&self, a: &mut [u64], modulus: &Modulus, n_inv: &ShoupConstant) {
        match self {
            Self::Tfhe(p) => p.normalize(a),
            Self::Concrete(_) => {
                for x in a.iter_mut() {
                    *x = modulus.mul_shoup(*x, n_inv);
                }
            }
        }
    }

    fn ntt_size(&self) -> usize {
        match self {
            Self::Tfhe(p) => p.ntt_size(),
            Self::Concrete(p) => p.ntt_size(),
        }
    }
}

/// A negacyclic NTT for one prime and one ring degree (tfhe-ntt, or
/// concrete-ntt where tfhe-ntt fails its check: see the module
/// documentation).
pub struct NttPlan {
    plan: Engine,
    modulus: Modulus,
    psi: u64,
    n_inv: ShoupConstant,
}

impl std::fmt::Debug for NttPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NttPlan")
            .field("degree", &self.degree())
            .field("modulus", &self.modulus.value())
            .finish_non_exhaustive()
    }
}

impl NttPlan {
    /// A plan for degree `n` (a power of two, at least 16) modulo the prime
    /// `modulus ≡ 1 (mod 2n)`.
    ///
    /// # Errors
    /// [`Error::NttUnsupported`] when no such transform exists.
    pub fn new(n: usize, modulus: Modulus) -> Result<Self> {
        let q = modulus.value();
        let unsupported = Error::NttUnsupported {
            degree: n,
            modulus: q,
        };
        let (plan, psi) = match tfhe_ntt::prime64::Plan::try_new(n, q).map(Engine::Tfhe) {
            Some(plan) => {
                let psi = root_of(&plan, n).ok_or(unsupported.clone())?;
                if q >= 1 << 52 || agrees_with_evaluation(&plan, &modulus, psi) {
                    (plan, psi)
                } else {
                    let plan = concrete_ntt::prime64::Plan::try_new(n, q)
                        .map(Engine::Concrete)
                        .ok_or(unsupported.clone())?;
                    let psi = root_of(&plan, n).ok_or(unsupported.clone())?;
                    (plan, psi)
                }
            }
            None => return Err(unsupported),
        };
        let n_inv = modulus.inv(n as u64).ok_or(unsupported)?;
        Ok(Self {
            plan,
            modulus,
            psi,
            n_inv: modulus.shoup(n_inv),
        })
    }

    /// The ring degree N.
    pub fn degree(&self) -> usize {
        self.plan.ntt_size()
    }

    /// The prime.
    pub fn modulus(&self) -> &Modulus {
        &self.modulus
    }

    /// The primitive 2N-th root ψ of this transform.
    pub fn psi(&self) -> u64 {
        self.psi
    }

    /// Whether the transform is served by the fallback library.
    pub fn is_fallback(&self) -> bool {
        matches!(self.plan, Engine::Concrete(_))
    }

    fn check(&self, len: usize) -> Result<()> {
        if len == self.degree() {
            Ok(())
        } else {
            Err(Error::LengthMismatch {
                expected: self.degree(),
                actual: len,
            })
        }
    }

    /// Forward transform in place: coefficients (natural order, reduced) to
    /// evaluations (bit-reversed order, reduced).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] if `a.len() != N`.
    pub fn forward(&self, a: &mut [u64]) -> Result<()> {
        self.check(a.len())?;
        self.plan.fwd(a);
        Ok(())
    }

    /// Inverse transform in place, normalised by `N^{-1}`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] if `a.len() != N`.
    pub fn inverse(&self, a: &mut [u64]) -> Result<()> {
        self.check(a.len())?;
        self.plan.inv(a);
        self.plan.normalize(a, &self.modulus, &self.n_inv);
        Ok(())
    }
}

/// ψ, read off the transform of the monomial X: `out[0] = ψ`.
fn root_of(plan: &Engine, n: usize) -> Option<u64> {
    let mut x = vec![0u64; n];
    *x.get_mut(1)? = 1;
    plan.fwd(&mut x);
    x.first().copied()
}

/// Checks `plan` on a pseudo-random polynomial: its forward transform at a
/// few outputs against direct evaluation at `ψ^(2·bitrev(j)+1)`, and the
/// round trip.
fn agrees_with_evaluation(plan: &Engine, m: &Modulus, psi: u64) -> bool {
    let n = plan.ntt_size();
    let log_n = n.trailing_zeros();
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ m.value();
    let a: Vec<u64> = (0..n)
        .map(|_| {
            // splitmix64
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            m.reduce(z ^ (z >> 31))
        })
        .collect();
    let mut f = a.clone();
    plan.fwd(&mut f);
    let step = (n / 16).max(1);
    let evaluations_agree = (0..n).step_by(step).chain([1, n - 1]).all(|j| {
        let x = m.pow(psi, 2 * bit_reverse(j, log_n) as u64 + 1);
        let value = a.iter().rev().fold(0u64, |v, &c| m.add(m.mul(v, x), c));
        f.get(j) == Some(&value)
    });
    if !evaluations_agree || f.iter().any(|&v| v >= m.value()) {
        return false;
    }
    plan.inv(&mut f);
    let n_inv = m.inv(n as u64).map(|v| m.shoup(v));
    n_inv.is_some_and(|w| f.iter().zip(&a).all(|(&x, &y)| m.mul_shoup(x, &w) == y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::seeded_rng;
    use crate::zq::primes::{PrimeGenerator, primitive_root};
    use proptest::prelude::*;
    use rand_core::Rng;

    fn schoolbook(a: &[u64], b: &[u64], m: &Modulus) -> Vec<u64> {
        let n = a.len();
        let mut out = vec![0u64; n];
        for (i, &x) in a.iter().enumerate() {
            for (j, &y) in b.iter().enumerate() {
                let p = m.mul(x, y);
                let k = i + j;
                if k < n {
                    out[k] = m.add(out[k], p);
                } else {
                    out[k - n] = m.sub(out[k - n], p);
                }
            }
        }
        out
    }

    fn plan(log_n: u32, bits: u32) -> NttPlan {
        let n = 1usize << log_n;
        let q = PrimeGenerator::new(bits, 2 * n as u64).next().unwrap();
        NttPlan::new(n, Modulus::new(q).unwrap()).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn product_matches_schoolbook(log_n in 4u32..9, bits in prop_oneof![Just(30u32), Just(42), Just(58), Just(61)], seed in any::<u64>()) {
            let p = plan(log_n, bits);
            let m = *p.modulus();
            let mut rng = seeded_rng(seed);
            let n = p.degree();
            let a: Vec<u64> = (0..n).map(|_| rng.next_u64() % m.value()).collect();
            let b: Vec<u64> = (0..n).map(|_| rng.next_u64() % m.value()).collect();
            let expected = schoolbook(&a, &b, &m);
            let (mut fa, mut fb) = (a.clone(), b.clone());
            p.forward(&mut fa).unwrap();
            p.forward(&mut fb).unwrap();
            prop_assert!(fa.iter().all(|&x| x < m.value()));
            let mut prod: Vec<u64> = fa.iter().zip(&fb).map(|(&x, &y)| m.mul(x, y)).collect();
            p.inverse(&mut prod).unwrap();
            prop_assert_eq!(prod, expected);
            p.inverse(&mut fa).unwrap();
            prop_assert_eq!(fa, a);
        }
    }

    #[test]
    fn output_order_is_bit_reversed_odd_powers_of_psi() {
        let p = plan(10, 50);
        let m = *p.modulus();
        let n = p.degree();
        let psi = p.psi();
        assert_eq!(
            m.pow(psi, n as u64),
            m.value() - 1,
            "ψ is a primitive 2N-th root"
        );
        assert!(primitive_root(&m, 2 * n as u64).is_some());
        // A random polynomial evaluated directly at ψ^(2·bitrev(j)+1).
        let mut rng = seeded_rng(7);
        let a: Vec<u64> = (0..n).map(|_| rng.next_u64() % m.value()).collect();
        let mut fa = a.clone();
        p.forward(&mut fa).unwrap();
        for j in [0usize, 1, 2, 3, 100, n - 1] {
            let x = m.pow(psi, 2 * bit_reverse(j, 10) as u64 + 1);
            let mut value = 0u64;
            for &c in a.iter().rev() {
                value = m.add(m.mul(value, x), c);
            }
            assert_eq!(fa[j], value, "evaluation {j}");
        }
        assert!(matches!(
            p.forward(&mut [0u64; 3]),
            Err(Error::LengthMismatch { .. })
        ));
    }
}
