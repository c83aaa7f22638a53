//! The forward NTT of a polynomial in `X^g` (`g = N/M`, a power of two): a
//! sparse-packed plaintext, or a message whose slots repeat with period
//! `M/2` (CKKS packs `M/2` slots into `Z[X^{N/M}]`).
//!
//! With the [module](super)'s convention `out[j] = a(ψ^(2·bitrev_N(j)+1))`,
//! a polynomial `a(X) = Σ_{k<M} c_k X^{k·g}` evaluates at `ψ^e` to
//! `Σ_k c_k (ψ^g)^{e·k}`, which depends on `e` modulo `4M/2 = 2M` only —
//! and `2·bitrev_N(j) + 1 mod 2M = 2·bitrev_M(j/g) + 1`. So
//!
//! `out[j] = out'[j / g]`,
//!
//! where `out'` is the `M`-point transform of the `c_k` with root `ψ^g`:
//! each of `M` values repeated `g` times. `ψ^{g·bitrev_M(k)} =
//! ψ^{bitrev_N(k)}` for `k < M`, so `out'` is the first `log2 M` stages of
//! the staged transform (`tables`) run on the `M` coefficients alone, with
//! the same twiddles. Every output is fully reduced, so whatever computes
//! the `M` values gives the limbs the length-`N` transform gives, bit for
//! bit: the GPU's `expand_periodic` kernel does the same in shared memory.
//! Expanding a period-32 DFT diagonal at FGb costs 64 points per limb this
//! way instead of 2^16.

use super::bit_reverse;
use crate::zq::Modulus;
use crate::{Error, Result};

/// The `M = c.len()` distinct values of the length-`n` forward transform
/// of `Σ_k c_k X^{k·n/M}` (`c` reduced modulo `m`; `psi` the length-`n`
/// transform's root, [`super::NttPlan::psi`]), in place: value `i` is
/// output `j` of the length-`n` transform for every `j` with
/// `j / (n/M) = i`.
///
/// # Errors
/// [`Error::LengthMismatch`] unless `M` is a power of two dividing `n`.
pub fn forward_subring(c: &mut [u64], psi: u64, n: usize, m: &Modulus) -> Result<()> {
    let points = c.len();
    if points == 0 || !points.is_power_of_two() || !n.is_power_of_two() || points > n {
        return Err(Error::LengthMismatch {
            expected: n,
            actual: points,
        });
    }
    // ψ^{bitrev_n(k)} = (ψ^g)^{bitrev_M(k)} for k < M.
    let bits = points.trailing_zeros();
    let root = m.pow(psi, (n / points) as u64);
    let mut powers = Vec::with_capacity(points);
    let mut p = 1u64;
    for _ in 0..points {
        powers.push(p);
        p = m.mul(p, root);
    }
    let twiddle = |k: usize| powers.get(bit_reverse(k, bits)).copied().unwrap_or(0);
    // Cooley–Tukey, natural to bit-reversed: stage with `groups` groups of
    // stride t, group i with W = ψ^{bitrev(groups + i)}.
    let mut groups = 1;
    while groups < points {
        let t = points / (2 * groups);
        for (i, block) in c.chunks_exact_mut(2 * t).enumerate() {
            let w = twiddle(groups + i);
            let (xs, ys) = block.split_at_mut(t);
            for (x, y) in xs.iter_mut().zip(ys.iter_mut()) {
                let v = m.mul(*y, w);
                (*x, *y) = (m.add(*x, v), m.sub(*x, v));
            }
        }
        groups *= 2;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use rand_core::Rng;

    use super::*;
    use crate::ntt::NttPlan;
    use crate::testing::seeded_rng;
    use crate::zq::primes::PrimeGenerator;

    /// Against the full transform of the sparse polynomial, at every
    /// subring size from 1 point to `n`, for primes of several sizes.
    #[test]
    fn the_subring_transform_is_the_full_transform_repeated() {
        let mut rng = seeded_rng(41);
        let n = 1usize << 12;
        for bits in [30u32, 50, 61] {
            let q = PrimeGenerator::new(bits, 2 * n as u64).next().unwrap();
            let m = Modulus::new(q).unwrap();
            let plan = NttPlan::new(n, m).unwrap();
            for log_points in 0..=n.trailing_zeros() {
                let points = 1usize << log_points;
                let gap = n / points;
                let c: Vec<u64> = (0..points).map(|_| rng.next_u64() % q).collect();
                let mut full = vec![0u64; n];
                for (k, &v) in c.iter().enumerate() {
                    full[k * gap] = v;
                }
                plan.forward(&mut full).unwrap();
                let mut small = c.clone();
                forward_subring(&mut small, plan.psi(), n, &m).unwrap();
                for (j, &v) in full.iter().enumerate() {
                    assert_eq!(v, small[j / gap], "{bits}-bit q, {points} points, j = {j}");
                }
            }
        }
    }

    #[test]
    fn sizes_that_do_not_divide_the_degree_are_refused() {
        let m = Modulus::new(97).unwrap();
        for len in [0usize, 3, 32] {
            let mut c = vec![1u64; len];
            assert!(forward_subring(&mut c, 1, 16, &m).is_err(), "{len}");
        }
    }
}
