//! Fast base conversion (Bajard et al.; Halevi–Polyakov–Shoup for the exact
//! variant), the arithmetic behind ModUp, ModDown and rescaling.

use rayon::prelude::*;

use crate::zq::{Modulus, ShoupConstant};
use crate::{Error, Result};

/// Converts residues modulo a basis `Q = q_0 ⋯ q_{k−1}` to residues modulo
/// another basis `p_0 … p_{m−1}`.
///
/// With `y_i = [x_i · (Q/q_i)^{-1}]_{q_i}`, the sum `Σ_i y_i · (Q/q_i)` equals
/// `x + u·Q` for an integer `0 ≤ u < k`. [`BaseConverter::convert_approx`]
/// returns that sum as it is (fine for ModUp, where `u·Q` vanishes in the key
/// switch); [`BaseConverter::convert_centered`] subtracts `v·Q` with
/// `v = round(Σ y_i / q_i)` computed in `f64`, which yields the centred
/// representative of `x mod Q` exactly (HPS): the rounding ModDown needs.
///
/// The floating-point sum is taken in a fixed order without fused
/// multiply-adds, so the GPU backend can reproduce it bit for bit.
#[derive(Clone, Debug)]
pub struct BaseConverter {
    from: Vec<Modulus>,
    to: Vec<Modulus>,
    /// `[(Q/q_i)^{-1}]_{q_i}`.
    q_hat_inv: Vec<ShoupConstant>,
    /// `q_hat[j][i] = (Q/q_i) mod p_j`.
    q_hat: Vec<Vec<u64>>,
    /// `Q mod p_j`.
    q_mod: Vec<u64>,
    /// `1 / q_i` as `f64`.
    inv_q: Vec<f64>,
    /// `Q mod p_j` for Shoup multiplication (the `v·Q` correction).
    q_mod_shoup: Vec<ShoupConstant>,
    /// Whether `Σ_i q_i < 2^64`: then a sum of `k` products `y_i·(Q/q_i mod
    /// p_j)` is below `p_j·2^64` and one Barrett reduction finishes it.
    narrow_sum: bool,
}

/// Coefficients converted together: the `k` scaled inputs and one target's
/// 128-bit sums of a block stay in L1.
const BLOCK: usize = 256;

impl BaseConverter {
    /// Tables for converting from `from` to `to`.
    ///
    /// # Errors
    /// [`Error::EmptyBasis`] for an empty source or target,
    /// [`Error::NotCoprime`] if a source modulus is not invertible.
    pub fn new(from: &[Modulus], to: &[Modulus]) -> Result<Self> {
        if from.is_empty() || to.is_empty() {
            return Err(Error::EmptyBasis);
        }
        let q_hat_inv = from
            .iter()
            .enumerate()
            .map(|(i, mi)| {
                let prod = from
                    .iter()
                    .enumerate()
                    .filter(|&(k, _)| k != i)
                    .fold(1u64, |acc, (_, mk)| mi.mul(acc, mi.reduce(mk.value())));
                mi.inv(prod)
                    .map(|inv| mi.shoup(inv))
                    .ok_or(Error::NotCoprime {
                        first: mi.value(),
                        second: mi.value(),
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let q_hat = to
            .iter()
            .map(|pj| {
                (0..from.len())
                    .map(|i| {
                        from.iter()
                            .enumerate()
                            .filter(|&(k, _)| k != i)
                            .fold(1u64, |acc, (_, mk)| pj.mul(acc, pj.reduce(mk.value())))
                    })
                    .collect()
            })
            .collect();
        let q_mod = to
            .iter()
            .map(|pj| {
                from.iter()
                    .fold(1u64, |acc, mk| pj.mul(acc, pj.reduce(mk.value())))
            })
            .collect();
        let inv_q = from.iter().map(|m| 1.0 / m.value() as f64).collect();
        let q_mod_shoup = to.iter().zip(&q_mod).map(|(pj, &q)| pj.shoup(q)).collect();
        let narrow_sum = from
            .iter()
            .try_fold(0u64, |acc, m| acc.checked_add(m.value()))
            .is_some();
        Ok(Self {
            from: from.to_vec(),
            to: to.to_vec(),
            q_hat_inv,
            q_hat,
            q_mod,
            inv_q,
            q_mod_shoup,
            narrow_sum,
        })
    }

    /// The source moduli.
    pub fn from(&self) -> &[Modulus] {
        &self.from
    }

    /// The target moduli.
    pub fn to(&self) -> &[Modulus] {
        &self.to
    }

    /// `[(Q/q_i)^{-1}]_{q_i}` per source modulus.
    pub fn q_hat_inv(&self) -> &[ShoupConstant] {
        &self.q_hat_inv
    }

    /// `(Q/q_i) mod p_j`, indexed `[j][i]`.
    pub fn q_hat(&self) -> &[Vec<u64>] {
        &self.q_hat
    }

    /// `Q mod p_j`.
    pub fn q_mod(&self) -> &[u64] {
        &self.q_mod
    }

    /// `1/q_i` in `f64`.
    pub fn inv_q(&self) -> &[f64] {
        &self.inv_q
    }

    /// `Q mod p_j` with its Shoup quotient (the `v·Q` correction).
    pub fn q_mod_shoup(&self) -> &[ShoupConstant] {
        &self.q_mod_shoup
    }

    fn check(&self, input: &[&[u64]], output: &[&mut [u64]]) -> Result<usize> {
        if input.len() != self.from.len() {
            return Err(Error::LengthMismatch {
                expected: self.from.len(),
                actual: input.len(),
            });
        }
        if output.len() != self.to.len() {
            return Err(Error::LengthMismatch {
                expected: self.to.len(),
                actual: output.len(),
            });
        }
        let n = input.first().map_or(0, |l| l.len());
        if let Some(bad) = input
            .iter()
            .map(|l| l.len())
            .chain(output.iter().map(|l| l.len()))
            .find(|&l| l != n)
        {
            return Err(Error::LengthMismatch {
                expected: n,
                actual: bad,
            });
        }
        Ok(n)
    }

    /// Converts block by block (in parallel over blocks): for each block of
    /// coefficients, `y_i = [x_i · (Q/q_i)^{-1}]_{q_i}`, with `exact` the
    /// `f64` estimate `v = round(Σ_i y_i / q_i)` summed in limb order, then
    /// for every target `Σ_i y_i · (Q/q_i) (− v·Q) mod p_j` in 128 bits.
    fn convert(&self, input: &[&[u64]], output: &mut [&mut [u64]], n: usize, exact: bool) {
        // blocks[b][j]: block b of target limb j.
        let mut blocks: Vec<Vec<&mut [u64]>> = (0..n.div_ceil(BLOCK))
            .map(|_| Vec::with_capacity(output.len()))
            .collect();
        for limb in output.iter_mut() {
            for (block, chunk) in blocks.iter_mut().zip(limb.chunks_mut(BLOCK)) {
                block.push(chunk);
            }
        }
        blocks
            .into_par_iter()
            .enumerate()
            .for_each(|(b, mut outs)| self.convert_block(input, &mut outs, b * BLOCK, exact));
    }

    fn convert_block(&self, input: &[&[u64]], outs: &mut [&mut [u64]], start: usize, exact: bool) {
        let len = outs.first().map_or(0, |o| o.len());
        let k = self.from.len();
        let mut y = vec![0u64; k * len];
        for (((yi, x), m), w) in y
            .chunks_exact_mut(len)
            .zip(input)
            .zip(&self.from)
            .zip(&self.q_hat_inv)
        {
            let x = x.get(start..start + len).unwrap_or_default();
            for (o, &xv) in yi.iter_mut().zip(x) {
                *o = m.mul_shoup(xv, w);
            }
        }
        let v: Option<Vec<u64>> = exact.then(|| {
            // Σ_i y_i · (1/q_i), summed in limb order: the same sequence of
            // roundings for every coefficient, on every backend.
            let mut sum = vec![0f64; len];
            for (yi, &inv) in y.chunks_exact(len).zip(&self.inv_q) {
                for (s, &yv) in sum.iter_mut().zip(yi) {
                    *s += yv as f64 * inv;
                }
            }
            sum.iter().map(|&s| (s + 0.5) as u64).collect()
        });
        let mut acc = vec![0u128; len];
        for (((out, pj), q_hat_row), q_mod) in outs
            .iter_mut()
            .zip(&self.to)
            .zip(&self.q_hat)
            .zip(&self.q_mod_shoup)
        {
            acc.iter_mut().for_each(|a| *a = 0);
            for (yi, &factor) in y.chunks_exact(len).zip(q_hat_row) {
                let factor = u128::from(factor);
                for (a, &yv) in acc.iter_mut().zip(yi) {
                    *a += u128::from(yv) * factor;
                }
            }
            if self.narrow_sum {
                for (o, &a) in out.iter_mut().zip(&acc) {
                    *o = pj.reduce_u128(a);
                }
            } else {
                for (o, &a) in out.iter_mut().zip(&acc) {
                    *o = pj.reduce_wide(a);
                }
            }
            if let Some(v) = &v {
                for (o, &vc) in out.iter_mut().zip(v) {
                    *o = pj.sub(*o, pj.mul_shoup(vc, q_mod));
                }
            }
        }
    }

    /// Approximate conversion: `out ≡ x + u·Q (mod p_j)` with `0 ≤ u < k`.
    /// `input` holds the `k` source limbs, `output` the `m` target limbs, all
    /// of one length.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] on wrong counts or lengths.
    pub fn convert_approx(&self, input: &[&[u64]], output: &mut [&mut [u64]]) -> Result<()> {
        let n = self.check(input, output)?;
        self.convert(input, output, n, false);
        Ok(())
    }

    /// Exact conversion of the centred representative of `x mod Q`
    /// (HPS rounding in `f64`). `input` holds the `k` source limbs, `output`
    /// the `m` target limbs, all of one length.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] on wrong counts or lengths.
    pub fn convert_centered(&self, input: &[&[u64]], output: &mut [&mut [u64]]) -> Result<()> {
        let n = self.check(input, output)?;
        self.convert(input, output, n, true);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rns::RnsBasis;
    use crate::testing::seeded_rng;
    use crate::zq::primes::PrimeGenerator;
    use num_bigint::BigInt;
    use proptest::prelude::*;
    use rand_core::Rng;

    fn moduli(bits: u32, count: usize, skip: usize) -> Vec<Modulus> {
        PrimeGenerator::new(bits, 1 << 11)
            .skip(skip)
            .take(count)
            .map(|p| Modulus::new(p).unwrap())
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn conversions_match_bigint(
            k in 1usize..12,
            m in 1usize..6,
            wide in any::<bool>(),
            seed in any::<u64>(),
        ) {
            // 61-bit sources past four limbs sum beyond 2^64: the wide
            // reduction path.
            let from = moduli(if wide { 61 } else { 55 }, k, 0);
            let to = moduli(60, m, 0);
            let (bf, bt) = (RnsBasis::new(from.clone()).unwrap(), RnsBasis::new(to.clone()).unwrap());
            let conv = BaseConverter::new(&from, &to).unwrap();
            // More than one block, the last one partial.
            let n = BLOCK + 40;
            let mut rng = seeded_rng(seed);
            let input: Vec<u64> = from.iter().flat_map(|q| {
                let q = q.value();
                (0..n).map(|_| rng.next_u64() % q).collect::<Vec<_>>()
            }).collect();
            let mut approx = vec![0u64; m * n];
            let mut exact = vec![0u64; m * n];
            let limbs: Vec<&[u64]> = input.chunks(n).collect();
            conv.convert_approx(&limbs, &mut approx.chunks_mut(n).collect::<Vec<_>>()).unwrap();
            conv.convert_centered(&limbs, &mut exact.chunks_mut(n).collect::<Vec<_>>()).unwrap();
            let q = BigInt::from(bf.product().clone());
            for c in 0..n {
                let residues: Vec<u64> = (0..k).map(|i| input[i * n + c]).collect();
                let x = bf.reconstruct_centered(&residues).unwrap();
                let got: Vec<u64> = (0..m).map(|j| exact[j * n + c]).collect();
                prop_assert_eq!(&got, &bt.decompose(&x));
                // The approximate result is x + u·Q for some 0 ≤ u < k (x taken in [0, Q)).
                let x_pos = BigInt::from(bf.reconstruct(&residues).unwrap());
                let got: Vec<u64> = (0..m).map(|j| approx[j * n + c]).collect();
                let ok = (0..k).any(|u| bt.decompose(&(&x_pos + BigInt::from(u) * &q)) == got);
                prop_assert!(ok);
            }
        }
    }
}
