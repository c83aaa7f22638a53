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
    /// Whether `Σ_i q_i < 2^64`: then a sum of `k` products `y_i·(Q/q_i mod
    /// p_j)` and the exact conversion's correction `v·(−Q mod p_j)` is below
    /// `p_j·2^64` (each `y_i ≤ q_i − 1` and `v ≤ k`, so the factors, each
    /// below `p_j`, are taken at most `Σ_i (q_i − 1) + k = Σ_i q_i` times),
    /// and one Montgomery reduction finishes it.
    narrow_sum: bool,
    /// With `narrow_sum`: `q_hat` times `2^64 mod p_j` (Montgomery form), so
    /// that a Montgomery reduction of the sum gives the canonical residue
    /// itself; empty otherwise.
    q_hat_montgomery: Vec<Vec<u64>>,
    /// With `narrow_sum`: `−Q mod p_j` in Montgomery form, the factor of
    /// the exact conversion's correction `v` inside the sum; empty
    /// otherwise.
    neg_q_montgomery: Vec<u64>,
    /// `−Q mod p_j`, the same factor for the wide sum (and the GPU
    /// kernels' sums).
    neg_q_mod: Vec<u64>,
    /// Sources summed between two reductions on the wide path: all of them
    /// where `p_max·Σ q_i` fits 128 bits (every preset's bases: 64 sources
    /// of 61 bits would), else as many as `q_max·p_max` allows.
    wide_group: usize,
    /// `−p_j^{-1} mod 2^64`, for the Montgomery reduction.
    p_inv_neg: Vec<u64>,
}

/// A narrow conversion's factors in Montgomery form
/// ([`BaseConverter::montgomery_form`]).
#[derive(Clone, Copy, Debug)]
pub struct MontgomeryForm<'a> {
    /// `q_hat[j][i]·2^64 mod p_j`.
    pub q_hat: &'a [Vec<u64>],
    /// `−Q·2^64 mod p_j`.
    pub neg_q_mod: &'a [u64],
    /// `−p_j^{-1} mod 2^64`.
    pub p_inv_neg: &'a [u64],
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
        let narrow_sum = from
            .iter()
            .try_fold(0u64, |acc, m| acc.checked_add(m.value()))
            .is_some();
        let neg_q_mod: Vec<u64> = to.iter().zip(&q_mod).map(|(pj, &q)| pj.neg(q)).collect();
        // The narrow sum's factors in Montgomery form (times 2^64 mod p_j).
        let (q_hat_montgomery, neg_q_montgomery) = if narrow_sum {
            to.iter()
                .zip(&q_hat)
                .zip(&neg_q_mod)
                .map(|((pj, row), &neg_q): ((&Modulus, &Vec<u64>), &u64)| {
                    let r = pj.reduce_u128(1u128 << 64);
                    let row: Vec<u64> = row.iter().map(|&f| pj.mul(f, r)).collect();
                    (row, pj.mul(neg_q, r))
                })
                .unzip()
        } else {
            (Vec::new(), Vec::new())
        };
        // The whole sum is at most `(p − 1)·Σ q_i` (see `reduce_row`); where
        // that could pass 2^128, groups of `g` sources, whose products are
        // each below `q_max·p_max`, are summed apart (the correction too).
        let q_sum: u128 = from.iter().map(|m| u128::from(m.value())).sum();
        let q_max = from
            .iter()
            .map(|m| u128::from(m.value()))
            .max()
            .unwrap_or(1);
        let p_max = to.iter().map(|m| u128::from(m.value())).max().unwrap_or(1);
        let wide_group = if q_sum.checked_mul(p_max).is_some() {
            from.len()
        } else {
            (u128::MAX / (q_max * p_max)).clamp(1, from.len() as u128) as usize
        };
        let p_inv_neg = to
            .iter()
            .map(|pj| inverse_mod_word(pj.value()).wrapping_neg())
            .collect();
        Ok(Self {
            from: from.to_vec(),
            to: to.to_vec(),
            q_hat_inv,
            q_hat,
            q_mod,
            inv_q,
            narrow_sum,
            q_hat_montgomery,
            neg_q_montgomery,
            neg_q_mod,
            wide_group,
            p_inv_neg,
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

    /// `−Q mod p_j`: the exact conversion's correction `v·Q` is subtracted
    /// by adding `v·(−Q mod p_j)` to each target's sum before its one
    /// reduction (on the CPU and in the GPU kernels alike).
    pub fn neg_q_mod(&self) -> &[u64] {
        &self.neg_q_mod
    }

    /// Where the sources' primes sum below 2^64 (a narrow sum): each
    /// target's `q_hat` row and `−Q mod p_j` in Montgomery form (times
    /// `2^64 mod p_j`), and `−p_j^{-1} mod 2^64`, so that one Montgomery
    /// reduction of a target's sum gives the canonical residue (what the
    /// CPU and the GPU kernels take instead of a Barrett step); `None` for a
    /// wide sum.
    pub fn montgomery_form(&self) -> Option<MontgomeryForm<'_>> {
        self.narrow_sum.then_some(MontgomeryForm {
            q_hat: &self.q_hat_montgomery,
            neg_q_mod: &self.neg_q_montgomery,
            p_inv_neg: &self.p_inv_neg,
        })
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
        if k == 0 {
            return;
        }
        // y[c·k + i] = [x_i · (Q/q_i)^{-1}]_{q_i}: one coefficient's k values
        // side by side, read together by every target below.
        let mut y = vec![0u64; k * len];
        for (i, ((x, m), w)) in input
            .iter()
            .zip(&self.from)
            .zip(&self.q_hat_inv)
            .enumerate()
        {
            let x = x.get(start..start + len).unwrap_or_default();
            for (yc, &xv) in y.chunks_exact_mut(k).zip(x) {
                if let Some(o) = yc.get_mut(i) {
                    *o = m.mul_shoup(xv, w);
                }
            }
        }
        let v: Option<Vec<u64>> = exact.then(|| {
            // Σ_i y_i · (1/q_i), summed in limb order from 0.0: the same
            // sequence of roundings for every coefficient, on every backend.
            y.chunks_exact(k)
                .map(|yc| {
                    let mut sum = 0f64;
                    for (&yv, &inv) in yc.iter().zip(&self.inv_q) {
                        sum += yv as f64 * inv;
                    }
                    (sum + 0.5) as u64
                })
                .collect()
        });
        // Per target, each coefficient's k products and the exact
        // conversion's `−v·Q` summed in registers and reduced at once: with
        // a narrow sum by Montgomery's method over factors in Montgomery
        // form (two multiplications where Barrett's reduction takes five;
        // the same canonical residue), else by one Barrett step; a sum that
        // could pass 2^128 (sources far beyond any preset's) in groups of
        // sources. The digit size is dispatched once per target, not per
        // coefficient.
        for (j, out) in outs.iter_mut().enumerate() {
            let Some(pj) = self.to.get(j) else {
                continue;
            };
            let v = v.as_deref();
            if self.narrow_sum {
                let (Some(row), Some(&neg_q), Some(&p_inv_neg)) = (
                    self.q_hat_montgomery.get(j),
                    self.neg_q_montgomery.get(j),
                    self.p_inv_neg.get(j),
                ) else {
                    continue;
                };
                let p = pj.value();
                let reduce = |s| montgomery_reduce(s, p, p_inv_neg);
                match k {
                    4 => reduce_row::<4>(out, &y, row, v, neg_q, reduce),
                    5 => reduce_row::<5>(out, &y, row, v, neg_q, reduce),
                    6 => reduce_row::<6>(out, &y, row, v, neg_q, reduce),
                    _ => reduce_row::<0>(out, &y, row, v, neg_q, reduce),
                }
            } else {
                let (Some(row), Some(&neg_q)) = (self.q_hat.get(j), self.neg_q_mod.get(j)) else {
                    continue;
                };
                if self.wide_group >= k {
                    reduce_row::<0>(out, &y, row, v, neg_q, |s| pj.reduce_wide(s));
                } else {
                    reduce_row_grouped(out, &y, row, v, neg_q, pj, self.wide_group);
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

/// `s·2^{-64} mod p`, canonical, for `s < p·2^64` and odd `p < 2^63`
/// (Montgomery's REDC with `p_inv_neg = −p^{-1} mod 2^64`): `m = s·p_inv_neg
/// mod 2^64` makes `s + m·p` a multiple of `2^64`, whose quotient is below
/// `2p`.
#[inline]
fn montgomery_reduce(s: u128, p: u64, p_inv_neg: u64) -> u64 {
    let (lo, hi) = (s as u64, (s >> 64) as u64);
    let m = lo.wrapping_mul(p_inv_neg);
    // The low words of s and m·p add to 0 mod 2^64, with a carry unless lo
    // is 0.
    let t = hi + ((u128::from(m) * u128::from(p)) >> 64) as u64 + u64::from(lo != 0);
    if t >= p { t - p } else { t }
}

/// One target's reduction (see `BaseConverter::convert_block`):
/// `out[c] = reduce(Σ_i y[c·k + i]·row_i (+ v[c]·neg_q))`, where `neg_q`
/// is `−Q mod p` in the form of `row` (Montgomery's for the narrow sum,
/// plain for the wide one) and `reduce` the matching reduction. `K` is the
/// digit size `k` when it is one of the unrolled sizes, else 0 (any `k`,
/// from `row`). With `y_i ≤ q_i − 1` and `v ≤ k` the sum is at most
/// `(p − 1)·Σ q_i`: below `p·2^64` for the narrow sum (`Σ q_i < 2^64`),
/// and below `2^128` for the wide one wherever `wide_group` covers every
/// source ([`reduce_row_grouped`] serves the rest).
#[inline(always)]
fn reduce_row<const K: usize>(
    out: &mut [u64],
    y: &[u64],
    row: &[u64],
    v: Option<&[u64]>,
    neg_q: u64,
    reduce: impl Fn(u128) -> u64,
) {
    let k = if K == 0 { row.len() } else { K };
    let sum = |yc: &[u64]| {
        if K == 0 {
            dot(yc, row)
        } else {
            dot_of::<K>(yc, row)
        }
    };
    match v {
        Some(v) => {
            for ((o, yc), &vc) in out.iter_mut().zip(y.chunks_exact(k)).zip(v) {
                *o = reduce(sum(yc) + u128::from(vc) * u128::from(neg_q));
            }
        }
        None => {
            for (o, yc) in out.iter_mut().zip(y.chunks_exact(k)) {
                *o = reduce(sum(yc));
            }
        }
    }
}

/// [`reduce_row`] for a wide sum that could pass 2^128: the products of
/// `group` sources at a time summed and reduced, the partial residues and
/// the correction added modulo `p`.
fn reduce_row_grouped(
    out: &mut [u64],
    y: &[u64],
    row: &[u64],
    v: Option<&[u64]>,
    neg_q: u64,
    p: &Modulus,
    group: usize,
) {
    let k = row.len();
    for (c, (o, yc)) in out.iter_mut().zip(y.chunks_exact(k)).enumerate() {
        let mut r = yc
            .chunks(group.max(1))
            .zip(row.chunks(group.max(1)))
            .fold(0, |r, (ys, fs)| p.add(r, p.reduce_wide(dot(ys, fs))));
        if let Some(&vc) = v.and_then(|v| v.get(c)) {
            r = p.add(r, p.reduce_wide(u128::from(vc) * u128::from(neg_q)));
        }
        *o = r;
    }
}

/// `Σ_i y_i·f_i` in 128 bits (the sum stays below `2^128` for the
/// converter's bases).
#[inline(always)]
fn dot(y: &[u64], f: &[u64]) -> u128 {
    y.iter()
        .zip(f)
        .map(|(&yv, &factor)| u128::from(yv) * u128::from(factor))
        .sum()
}

/// [`dot`] over the first `K` words of `y` and `f`, unrolled at compile
/// time (the common digit sizes); 0 when either is shorter.
#[inline(always)]
fn dot_of<const K: usize>(y: &[u64], f: &[u64]) -> u128 {
    match (y.first_chunk::<K>(), f.first_chunk::<K>()) {
        (Some(y), Some(f)) => dot(y, f),
        _ => 0,
    }
}

/// `p^{-1} mod 2^64` for odd `p` (Newton's iteration, each step doubling
/// the correct low bits from the 3 that `p` itself gives).
fn inverse_mod_word(p: u64) -> u64 {
    let mut x = p;
    for _ in 0..5 {
        x = x.wrapping_mul(2u64.wrapping_sub(p.wrapping_mul(x)));
    }
    x
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

    /// The residue `x_i` whose scaled value `[x_i·(Q/q_i)^{-1}]_{q_i}` in
    /// the conversion is `y`: `x_i = y·(Q/q_i) mod q_i`.
    fn input_for(conv: &BaseConverter, i: usize, y: u64) -> u64 {
        let q = conv.from[i];
        q.mul(y, q.inv(conv.q_hat_inv[i].value()).unwrap())
    }

    /// Montgomery's reduction against the big-integer residue, at the
    /// bounds of its range (sums up to `p·2^64 − 1`).
    #[test]
    fn montgomery_reduction_matches_bigint() {
        let mut rng = seeded_rng(7);
        for bits in [30, 50, 60, 62] {
            for m in moduli(bits, 3, 0) {
                let p = m.value();
                let p_inv_neg = inverse_mod_word(p).wrapping_neg();
                assert_eq!(p.wrapping_mul(p_inv_neg.wrapping_neg()), 1);
                let r_inv = BigInt::from(1u8) << 64u32;
                let r_inv = r_inv.modinv(&BigInt::from(p)).unwrap();
                let top = u128::from(p) << 64;
                let mut cases = vec![0, 1, top - 1, top - u128::from(p), u128::from(u64::MAX)];
                cases.extend((0..200).map(|_| {
                    ((u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())) % top
                }));
                for s in cases {
                    let want = (BigInt::from(s) * &r_inv) % BigInt::from(p);
                    assert_eq!(
                        BigInt::from(montgomery_reduce(s, p, p_inv_neg)),
                        want,
                        "{s} mod {p}"
                    );
                }
            }
        }
    }

    /// The exact conversion on both sides of the narrow sum's bound: 61-bit
    /// sources, up to eight of them narrow (`Σ q_i < 2^64`, the correction
    /// `v·(−Q)` inside the Montgomery sum), nine wide (inside the sum too,
    /// one Barrett step), every digit size the reduction unrolls and some
    /// it does not. A third of the coefficients are built from `y_i = q_i − 1 − δ_i`
    /// (small `δ_i`), `x_i = y_i·(Q/q_i) mod q_i`: then `v = k` and the sum
    /// is near its largest; the rest are random.
    #[test]
    #[expect(
        clippy::needless_range_loop,
        reason = "each coefficient is built and checked across all its limbs"
    )]
    fn exact_conversion_at_the_narrow_sum_boundary_matches_bigint() {
        let mut rng = seeded_rng(11);
        for k in [4, 5, 6, 7, 8, 9] {
            let from = moduli(61, k, 0);
            let to = moduli(60, 3, 0);
            let sum: u128 = from.iter().map(|m| u128::from(m.value())).sum();
            let conv = BaseConverter::new(&from, &to).unwrap();
            assert_eq!(conv.narrow_sum, sum < 1u128 << 64, "k = {k}");
            assert_eq!(conv.narrow_sum, k <= 8, "k = {k}");
            let (bf, bt) = (
                RnsBasis::new(from.clone()).unwrap(),
                RnsBasis::new(to.clone()).unwrap(),
            );
            let n = BLOCK + 7;
            let mut input = vec![vec![0u64; n]; k];
            let mut extreme = 0;
            for c in 0..n {
                for (i, q) in from.iter().enumerate() {
                    input[i][c] = if c % 3 == 0 {
                        input_for(&conv, i, q.value() - 1 - rng.next_u64() % 64)
                    } else {
                        rng.next_u64() % q.value()
                    };
                }
                // v = round(Σ y_i / q_i), as the conversion computes it.
                let v: f64 = (0..k)
                    .map(|i| {
                        let y = from[i].mul_shoup(input[i][c], &conv.q_hat_inv[i]);
                        y as f64 * conv.inv_q[i]
                    })
                    .sum();
                extreme += usize::from((v + 0.5) as usize == k);
            }
            assert!(
                extreme >= n / 3,
                "k = {k}: v = k for {extreme} coefficients"
            );
            let limbs: Vec<&[u64]> = input.iter().map(Vec::as_slice).collect();
            let mut out = vec![vec![0u64; n]; to.len()];
            let mut outs: Vec<&mut [u64]> = out.iter_mut().map(Vec::as_mut_slice).collect();
            conv.convert_centered(&limbs, &mut outs).unwrap();
            for c in 0..n {
                let residues: Vec<u64> = input.iter().map(|l| l[c]).collect();
                let x = bf.reconstruct_centered(&residues).unwrap();
                let got: Vec<u64> = out.iter().map(|l| l[c]).collect();
                assert_eq!(got, bt.decompose(&x), "k = {k}, coefficient {c}");
            }
        }
    }

    /// A wide sum that would pass 2^128: 200 sources of 61 bits into 61-bit
    /// targets (no preset comes near: 64 such sources still fit), summed
    /// group by group, exact and approximate, against big-integer CRT;
    /// half the coefficients at their largest `y_i`.
    #[test]
    fn conversion_of_very_many_sources_is_reduced_in_groups() {
        let mut rng = seeded_rng(13);
        let from = moduli(61, 200, 0);
        let to = moduli(61, 2, 200);
        let conv = BaseConverter::new(&from, &to).unwrap();
        assert!(conv.wide_group < from.len());
        let (bf, bt) = (
            RnsBasis::new(from.clone()).unwrap(),
            RnsBasis::new(to.clone()).unwrap(),
        );
        let n = 16;
        let input: Vec<Vec<u64>> = from
            .iter()
            .enumerate()
            .map(|(i, q)| {
                (0..n)
                    .map(|c| {
                        if c % 2 == 0 {
                            input_for(&conv, i, q.value() - 1)
                        } else {
                            rng.next_u64() % q.value()
                        }
                    })
                    .collect()
            })
            .collect();
        let limbs: Vec<&[u64]> = input.iter().map(Vec::as_slice).collect();
        let mut exact = vec![vec![0u64; n]; to.len()];
        let mut approx = vec![vec![0u64; n]; to.len()];
        conv.convert_centered(
            &limbs,
            &mut exact.iter_mut().map(Vec::as_mut_slice).collect::<Vec<_>>(),
        )
        .unwrap();
        conv.convert_approx(
            &limbs,
            &mut approx.iter_mut().map(Vec::as_mut_slice).collect::<Vec<_>>(),
        )
        .unwrap();
        let q = BigInt::from(bf.product().clone());
        for c in 0..n {
            let residues: Vec<u64> = input.iter().map(|l| l[c]).collect();
            let x = bf.reconstruct_centered(&residues).unwrap();
            let got: Vec<u64> = exact.iter().map(|l| l[c]).collect();
            assert_eq!(got, bt.decompose(&x), "exact, coefficient {c}");
            // The approximate result is x + u·Q, 0 ≤ u < k, for x in [0, Q).
            let x_pos = BigInt::from(bf.reconstruct(&residues).unwrap());
            let got: Vec<u64> = approx.iter().map(|l| l[c]).collect();
            assert!(
                (0..from.len()).any(|u| bt.decompose(&(&x_pos + BigInt::from(u) * &q)) == got),
                "approximate, coefficient {c}"
            );
        }
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
