//! The special FFT of CKKS: evaluation of a real polynomial at the primitive
//! roots `ω^(5^j)`, with `ω = e^{iπ/(2n)}` for `n` slots.
//!
//! With `n` slots the message polynomial lives in `Z[Y]/(Y^{2n}+1)`,
//! `Y = X^{N/(2n)}`. Since `(ω^(5^j))^n = i`, its value at `ω^(5^j)` is
//! `Σ_{k<n} u_k ω^{5^j k}` with `u_k = c_k + i·c_{k+n}`. The points
//! `{5^j mod 4n}` are exactly the residues `≡ 1 (mod 4)`, so writing
//! `5^j ≡ 1 + 4t_j` turns the evaluation into an ordinary size-`n` DFT of
//! `u_k ω^k`, read at index `t_j`. That gives an `O(n log n)` transform with
//! a standard radix-2 FFT and a fixed permutation.

use std::f64::consts::PI;

use num_complex::Complex64;

/// Tables for one slot count `n` (a power of two).
#[derive(Clone, Debug)]
pub struct SpecialFft {
    n: usize,
    /// `e^{2πik/n}`.
    roots: Vec<Complex64>,
    /// `ω^k = e^{iπk/(2n)}`.
    twist: Vec<Complex64>,
    /// Slot `j` reads DFT index `t_j = (5^j mod 4n − 1)/4`.
    order: Vec<usize>,
}

impl SpecialFft {
    /// Tables for `n` slots.
    pub fn new(n: usize) -> Self {
        let n = n.max(1).next_power_of_two();
        let roots = (0..n)
            .map(|k| Complex64::from_polar(1.0, 2.0 * PI * k as f64 / n as f64))
            .collect();
        let twist = (0..n)
            .map(|k| Complex64::from_polar(1.0, PI * k as f64 / (2 * n) as f64))
            .collect();
        let four_n = 4 * n as u64;
        let mut power = 1u64;
        let order = (0..n)
            .map(|_| {
                let t = ((power - 1) / 4) as usize;
                power = power * 5 % four_n;
                t
            })
            .collect();
        Self {
            n,
            roots,
            twist,
            order,
        }
    }

    /// The slot count.
    pub fn slots(&self) -> usize {
        self.n
    }

    /// In-place radix-2 DFT `V_t = Σ_k v_k e^{±2πitk/n}`.
    fn dft(&self, v: &mut [Complex64], inverse: bool) {
        let n = self.n;
        let bits = n.trailing_zeros();
        for i in 0..n {
            let j = crate::ntt::bit_reverse(i, bits);
            if i < j {
                v.swap(i, j);
            }
        }
        let mut len = 2;
        while len <= n {
            let half = len / 2;
            let step = n / len;
            for block in v.chunks_exact_mut(len) {
                let (lo, hi) = block.split_at_mut(half);
                for (j, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                    let w = self.roots.get(j * step).copied().unwrap_or_default();
                    let w = if inverse { w.conj() } else { w };
                    let t = *b * w;
                    *b = *a - t;
                    *a += t;
                }
            }
            len *= 2;
        }
    }

    /// Decoding direction: `u` (length `n`) to slot values `z_j`.
    pub fn forward(&self, u: &[Complex64]) -> Vec<Complex64> {
        let mut v: Vec<Complex64> = u.iter().zip(&self.twist).map(|(x, w)| x * w).collect();
        v.resize(self.n, Complex64::default());
        self.dft(&mut v, false);
        self.order
            .iter()
            .map(|&t| v.get(t).copied().unwrap_or_default())
            .collect()
    }

    /// Encoding direction: slot values `z` (length `n`) to `u`.
    pub fn inverse(&self, z: &[Complex64]) -> Vec<Complex64> {
        let mut v = vec![Complex64::default(); self.n];
        for (&t, &x) in self.order.iter().zip(z) {
            if let Some(slot) = v.get_mut(t) {
                *slot = x;
            }
        }
        self.dft(&mut v, true);
        let scale = 1.0 / self.n as f64;
        v.iter()
            .zip(&self.twist)
            .map(|(x, w)| x * w.conj() * scale)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{seeded_rng, unit_disk};

    /// Direct evaluation of `Σ_k c_k ω^{5^j k}` over the `2n` real
    /// coefficients.
    fn naive_slots(coeffs: &[f64], n: usize) -> Vec<Complex64> {
        let four_n = 4 * n as u64;
        let mut power = 1u64;
        (0..n)
            .map(|_| {
                let e = power;
                power = power * 5 % four_n;
                coeffs
                    .iter()
                    .enumerate()
                    .map(|(k, &c)| {
                        c * Complex64::from_polar(
                            1.0,
                            PI * (e * k as u64 % four_n) as f64 / (2 * n) as f64,
                        )
                    })
                    .sum()
            })
            .collect()
    }

    #[test]
    fn matches_direct_evaluation_and_round_trips() {
        for log_n in 0..8 {
            let n = 1usize << log_n;
            let fft = SpecialFft::new(n);
            let mut rng = seeded_rng(log_n as u64);
            let z = unit_disk(&mut rng, n);
            let u = fft.inverse(&z);
            let coeffs: Vec<f64> = u
                .iter()
                .map(|c| c.re)
                .chain(u.iter().map(|c| c.im))
                .collect();
            let direct = naive_slots(&coeffs, n);
            for (a, b) in direct.iter().zip(&z) {
                assert!((a - b).norm() < 1e-12, "n = {n}");
            }
            let back = fft.forward(&u);
            for (a, b) in back.iter().zip(&z) {
                assert!((a - b).norm() < 1e-12, "n = {n}");
            }
        }
    }
}
