//! [`RnsBasis`] and CRT reconstruction.

use num_bigint::{BigInt, BigUint};
use num_traits::{One, Zero};

use crate::zq::{Modulus, ShoupConstant};
use crate::{Error, Result};

/// An ordered set of pairwise coprime moduli `q_0 … q_{k−1}` and their product.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RnsBasis {
    moduli: Vec<Modulus>,
    product: BigUint,
}

impl RnsBasis {
    /// A basis from pairwise coprime moduli.
    ///
    /// # Errors
    /// [`Error::EmptyBasis`] for no moduli, [`Error::NotCoprime`] if two share
    /// a factor.
    pub fn new(moduli: Vec<Modulus>) -> Result<Self> {
        if moduli.is_empty() {
            return Err(Error::EmptyBasis);
        }
        for (i, a) in moduli.iter().enumerate() {
            for b in moduli.iter().skip(i + 1) {
                if gcd(a.value(), b.value()) != 1 {
                    return Err(Error::NotCoprime {
                        first: a.value(),
                        second: b.value(),
                    });
                }
            }
        }
        let product = moduli.iter().fold(BigUint::one(), |p, m| p * m.value());
        Ok(Self { moduli, product })
    }

    /// The moduli.
    pub fn moduli(&self) -> &[Modulus] {
        &self.moduli
    }

    /// Number of moduli.
    pub fn len(&self) -> usize {
        self.moduli.len()
    }

    /// Always false: a basis has at least one modulus.
    pub fn is_empty(&self) -> bool {
        self.moduli.is_empty()
    }

    /// The product `Q` of the moduli.
    pub fn product(&self) -> &BigUint {
        &self.product
    }

    /// The residues of `x` (any sign).
    pub fn decompose(&self, x: &BigInt) -> Vec<u64> {
        self.moduli
            .iter()
            .map(|m| {
                let r = x % BigInt::from(m.value());
                let r = if r < BigInt::zero() {
                    r + BigInt::from(m.value())
                } else {
                    r
                };
                u64::try_from(r).unwrap_or(0)
            })
            .collect()
    }

    /// The unique `x ∈ [0, Q)` with the given residues.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] if the residue count is wrong.
    pub fn reconstruct(&self, residues: &[u64]) -> Result<BigUint> {
        if residues.len() != self.len() {
            return Err(Error::LengthMismatch {
                expected: self.len(),
                actual: residues.len(),
            });
        }
        let mut x = BigUint::zero();
        for (m, &r) in self.moduli.iter().zip(residues) {
            let q = m.value();
            let q_hat = &self.product / q;
            let q_hat_mod = u64::try_from(&q_hat % q).unwrap_or(0);
            let inv = m.inv(q_hat_mod).ok_or(Error::NotCoprime {
                first: q,
                second: q,
            })?;
            x += q_hat * m.mul(m.reduce(r), inv);
        }
        Ok(x % &self.product)
    }

    /// The unique `x ∈ (−Q/2, Q/2]` with the given residues.
    ///
    /// # Errors
    /// As [`RnsBasis::reconstruct`].
    pub fn reconstruct_centered(&self, residues: &[u64]) -> Result<BigInt> {
        let x = BigInt::from(self.reconstruct(residues)?);
        let q = BigInt::from(self.product.clone());
        Ok(if &x + &x > q { x - q } else { x })
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Centred CRT reconstruction straight to `f64`, for decoding.
///
/// Mixed-radix (Garner) digits are taken in the balanced range `(−q_i/2,
/// q_i/2]`, so a small value has small high digits and the Horner sum
/// `d_0 + q_0(d_1 + q_1(d_2 + …))` suffers no cancellation: the result is the
/// centred value rounded to `f64`, at `O(k²)` word operations per value.
#[derive(Clone, Debug)]
pub struct CrtToFloat {
    moduli: Vec<Modulus>,
    /// `inv[j][i] = q_i^{-1} mod q_j` for `i < j`, with Shoup quotients.
    inv: Vec<Vec<ShoupConstant>>,
}

impl CrtToFloat {
    /// Tables for `basis`.
    pub fn new(basis: &RnsBasis) -> Self {
        let moduli = basis.moduli().to_vec();
        let inv = moduli
            .iter()
            .enumerate()
            .map(|(j, mj)| {
                moduli
                    .iter()
                    .take(j)
                    .map(|mi| mj.shoup(mj.inv(mi.value()).unwrap_or(0)))
                    .collect()
            })
            .collect();
        Self { moduli, inv }
    }

    /// The centred value of the residues `residues[i]` as `f64`. `digits` is
    /// scratch of the basis's length.
    pub fn reconstruct(&self, residues: impl Iterator<Item = u64>, digits: &mut Vec<i64>) -> f64 {
        digits.clear();
        for ((mj, inv_row), r) in self.moduli.iter().zip(&self.inv).zip(residues) {
            let mut t = r;
            for (&d, inv) in digits.iter().zip(inv_row) {
                t = mj.mul_shoup(mj.sub(t, mj.reduce_i64(d)), inv);
            }
            digits.push(mj.center(t));
        }
        let mut value = 0f64;
        for (m, &d) in self.moduli.iter().zip(digits.iter()).rev() {
            value = value * m.value() as f64 + d as f64;
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::seeded_rng;
    use crate::zq::primes::PrimeGenerator;
    use proptest::prelude::*;
    use rand_core::Rng;

    fn basis(count: usize, bits: u32) -> RnsBasis {
        let primes = PrimeGenerator::new(bits, 1 << 12).take(count);
        RnsBasis::new(primes.map(|p| Modulus::new(p).unwrap()).collect()).unwrap()
    }

    proptest! {
        #[test]
        fn crt_round_trip(count in 1usize..8, seed in any::<u64>()) {
            let b = basis(count, 50);
            let mut rng = seeded_rng(seed);
            let residues: Vec<u64> = b.moduli().iter().map(|m| rng.next_u64() % m.value()).collect();
            let x = b.reconstruct(&residues).unwrap();
            prop_assert!(&x < b.product());
            prop_assert_eq!(b.decompose(&BigInt::from(x)), residues.clone());
            let c = b.reconstruct_centered(&residues).unwrap();
            prop_assert!(BigUint::from(2u32) * c.magnitude() <= *b.product());
            prop_assert_eq!(b.decompose(&c), residues);
        }

        #[test]
        fn float_crt_matches_bigint(count in 1usize..10, seed in any::<u64>(), magnitude_bits in 1u32..200) {
            let b = basis(count, 58);
            let mut rng = seeded_rng(seed);
            let bits = magnitude_bits.min(58 * count as u32 - 2);
            let mut x = BigInt::from(rng.next_u64() | 1);
            while x.bits() < u64::from(bits) {
                x = (x << 64usize) + BigInt::from(rng.next_u64());
            }
            x >>= (x.bits() - u64::from(bits)) as usize;
            if rng.next_u32() & 1 == 1 {
                x = -x;
            }
            let residues = b.decompose(&x);
            let crt = CrtToFloat::new(&b);
            let got = crt.reconstruct(residues.iter().copied(), &mut Vec::new());
            let expected: f64 = x.to_string().parse().unwrap();
            prop_assert!((got - expected).abs() <= expected.abs() * 1e-15, "{} vs {}", got, expected);
        }
    }

    #[test]
    fn rejects_bad_bases() {
        assert_eq!(RnsBasis::new(vec![]), Err(Error::EmptyBasis));
        let m = Modulus::new(15).unwrap();
        let n = Modulus::new(10).unwrap();
        assert_eq!(
            RnsBasis::new(vec![m, n]),
            Err(Error::NotCoprime {
                first: 15,
                second: 10
            })
        );
        let b = basis(2, 40);
        assert!(matches!(
            b.reconstruct(&[1]),
            Err(Error::LengthMismatch { .. })
        ));
    }
}
