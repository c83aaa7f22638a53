//! A linear transform's inner sum on one limb: `Σ_t a_t · b_t` added
//! exactly in 128 bits and reduced once per eight terms, as the GPU's
//! `mul_sum` kernel does, with second operands that may repeat
//! ([`crate::backend::PeriodicLimbs`]).

use crate::zq::Modulus;

/// One term on one limb: `a` (N words), `b` (`N >> log_gap` words, value
/// `j` at word `j >> log_gap`), `log_gap`.
pub(super) type Factors<'a> = (&'a [u64], &'a [u64], u32);

/// Terms summed between two reductions: eight products below `q² < 2^124`
/// and the running value stay below `2^128`.
const TERMS: usize = 8;

/// Coefficients summed together (their 128-bit sums stay in L1).
const BLOCK: usize = 512;

/// `o = [o +] Σ_t a_t · b_t mod m` over one limb: the residue of the
/// sequential modular sum, with `o` read and written once per eight terms
/// instead of once per term.
pub(super) fn sum_limb(o: &mut [u64], terms: &[Factors<'_>], accumulate: bool, m: &Modulus) {
    let mut sums = [0u128; BLOCK];
    let mut spread = [[0u64; BLOCK]; 2];
    for (start, o) in o.chunks_mut(BLOCK).enumerate().map(|(i, o)| (i * BLOCK, o)) {
        let range = start..start + o.len();
        for (group, chunk) in terms.chunks(TERMS).enumerate() {
            let s = sums.get_mut(..o.len()).unwrap_or_default();
            if accumulate || group > 0 {
                for (s, &x) in s.iter_mut().zip(&*o) {
                    *s = u128::from(x);
                }
            } else {
                s.fill(0);
            }
            // Two terms per pass: the sums are read and written once per
            // pair.
            for pair in chunk.chunks(2) {
                let [first, second] = &mut spread;
                match pair {
                    [(a, b, g), (c, d, h)] => {
                        let a = a.get(range.clone()).unwrap_or_default();
                        let b = values(b, *g, range.clone(), first);
                        let c = c.get(range.clone()).unwrap_or_default();
                        let d = values(d, *h, range.clone(), second);
                        for ((s, (&x, &y)), (&u, &v)) in
                            s.iter_mut().zip(a.iter().zip(b)).zip(c.iter().zip(d))
                        {
                            *s += u128::from(x) * u128::from(y) + u128::from(u) * u128::from(v);
                        }
                    }
                    [(a, b, g)] => {
                        let a = a.get(range.clone()).unwrap_or_default();
                        let b = values(b, *g, range.clone(), first);
                        for ((s, &x), &y) in s.iter_mut().zip(a).zip(b) {
                            *s += u128::from(x) * u128::from(y);
                        }
                    }
                    _ => {}
                }
            }
            // One Barrett step reduces any 128-bit sum (`Modulus::reduce_u128`).
            for (o, &s) in o.iter_mut().zip(&*s) {
                *o = m.reduce_u128(s);
            }
        }
    }
}

/// The values of coefficients `range` of a limb kept with `log_gap`: the
/// slice itself for a full limb, else its words spread into `scratch`.
fn values<'s>(
    limb: &'s [u64],
    log_gap: u32,
    range: std::ops::Range<usize>,
    scratch: &'s mut [u64; BLOCK],
) -> &'s [u64] {
    if log_gap == 0 {
        return limb.get(range).unwrap_or_default();
    }
    let len = range.len().min(BLOCK);
    for (slot, j) in scratch.iter_mut().zip(range) {
        *slot = limb.get(j >> log_gap).copied().unwrap_or_default();
    }
    scratch.get(..len).unwrap_or_default()
}
