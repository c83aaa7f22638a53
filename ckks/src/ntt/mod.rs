//! The negacyclic number-theoretic transform over `Z_q[X]/(X^N + 1)`.
//!
//! One convention serves both backends (DESIGN.md, "The seam"): the forward
//! transform maps coefficients in natural order to evaluations in
//! **bit-reversed** order, `out[j] = a(ψ^(2·bitrev(j)+1))`, with ψ the
//! primitive 2N-th root that concrete-ntt picks for the prime. The inverse is
//! normalised (it divides by N). [`NttPlan::psi`] exposes ψ so the GPU's
//! twiddle tables are built from the very same root.

mod automorphism;
mod tables;

pub use automorphism::{
    GaloisElement, apply_automorphism_coeff, automorphism_permutation, bit_reverse,
};
pub use tables::{TwiddleTables, forward_staged, inverse_staged};

use concrete_ntt::prime64::Plan;

use crate::zq::{Modulus, ShoupConstant};
use crate::{Error, Result};

/// A negacyclic NTT for one prime and one ring degree, built on
/// `concrete_ntt::prime64::Plan`.
pub struct NttPlan {
    plan: Plan,
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
        let plan = Plan::try_new(n, q).ok_or(unsupported.clone())?;
        // Transforming the monomial X reveals the root: out[0] = ψ.
        let mut x = vec![0u64; n];
        if let Some(c) = x.get_mut(1) {
            *c = 1;
        }
        plan.fwd(&mut x);
        let psi = x.first().copied().ok_or(unsupported.clone())?;
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
        for x in a.iter_mut() {
            *x = self.modulus.mul_shoup(*x, &self.n_inv);
        }
        Ok(())
    }
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
