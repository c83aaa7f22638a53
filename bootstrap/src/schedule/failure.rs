//! The exact probability that ModRaise's overflow `I` exceeds EvalMod's
//! range `K` (BOOTSTRAP-NOTES §3.1): the Irwin–Hall tail in big integers.

use num_bigint::BigInt;
use num_traits::{One, ToPrimitive, Zero};

/// `log2 Pr[|S| > t]` for `S` the sum of `m` independent `U(−½, ½)` and
/// `t` an integer or half-integer: the exact Irwin–Hall CDF
/// `F(u) = Σ_{k<u} (−1)^k C(m,k) (u−k)^m / m!` in big integers (the
/// alternating sum cancels far too much for f64).
pub fn irwin_hall_tail_log2(m: usize, t: f64) -> f64 {
    // Pr[S > t] = F(m/2 − t) by symmetry; with p = m − 2t (an integer),
    // F = Σ_{k < p/2} (−1)^k C(m,k) (p − 2k)^m / (2^m · m!).
    let p2 = m as f64 - 2.0 * t;
    if p2 <= 0.0 || p2.fract() != 0.0 {
        return f64::NEG_INFINITY;
    }
    let p = p2 as u64;
    let mut sum = BigInt::zero();
    let mut binom = BigInt::one();
    let mut k = 0u64;
    while 2 * k < p {
        let term = &binom * BigInt::from(p - 2 * k).pow(m as u32);
        if k.is_multiple_of(2) {
            sum += term;
        } else {
            sum -= term;
        }
        binom = binom * BigInt::from(m as u64 - k) / BigInt::from(k + 1);
        k += 1;
    }
    let factorial: BigInt = (1..=m as u64).map(BigInt::from).product();
    // Two tails: log2(2·sum / (2^m · m!)).
    log2_big(&sum) - m as f64 - log2_big(&factorial) + 1.0
}

fn log2_big(x: &BigInt) -> f64 {
    let bits = x.bits();
    if bits == 0 {
        return f64::NEG_INFINITY;
    }
    let shift = bits.saturating_sub(60);
    let top = (x >> shift).to_f64().unwrap_or(f64::NAN);
    top.log2() + shift as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irwin_hall_tails_match_the_notes() {
        // BOOTSTRAP-NOTES §3.1: log2(N·Pr[|S| > K]), and Lattigo's 2^−138.7.
        let cases = [
            (192usize, 16u32, 20.0, -4.9),
            (192, 16, 25.0, -15.6),
            (192, 16, 32.0, -34.8),
            (192, 16, 40.0, -63.5),
            (192, 15, 25.0, -16.6),
            (192, 15, 40.0, -64.5),
            (128, 17, 16.0, -3.1),
            (128, 17, 32.0, -61.3),
            (64, 17, 20.0, -47.6),
            (32, 16, 16.0, -138.7),
        ];
        for (h, log_n, k, expected) in cases {
            let got = f64::from(log_n) + irwin_hall_tail_log2(h + 1, k);
            assert!(
                (got - expected).abs() < 0.06,
                "h {h} N 2^{log_n} K {k}: {got}"
            );
        }
        assert_eq!(irwin_hall_tail_log2(33, 17.0), f64::NEG_INFINITY);
    }
}
