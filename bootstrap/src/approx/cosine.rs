//! The scaled cosine of EvalMod and its double angles (Han–Ki, ePrint
//! 2019/688 §3).
//!
//! With `y = x/K ∈ [−1, 1]` (CoeffToSlot folds the `1/K`), the polynomial
//! approximates `λ_0·cos(2π(K·y − ¼)/2^r)`; then `r` steps
//! `c ← 2c² − λ_i²` with `λ_{i+1} = λ_i²` turn `λ_i·cos θ` into
//! `λ_{i+1}·cos 2θ`, ending at `λ_r·cos(2π(x − ¼)) = λ_r·sin(2πx)`. Choosing
//! `λ_r = 1/(2π)` makes the output `sin(2πx)/(2π) ≈ x − round(x)` with no
//! constant multiplication (and no level) spent on the factor; an arcsine
//! stage takes `λ_r = 1` and folds `1/(2π)` into its own coefficients.

use std::f64::consts::PI;

use super::chebyshev;
use crate::{Error, Result};

/// `λ_0·cos(2π(K·y − ¼)/2^r)` on `y ∈ [−1, 1]`, to be interpolated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScaledCosine {
    /// The range bound `K` on `|x|`.
    pub k: f64,
    /// The number `r` of double angles that follow.
    pub double_angles: u32,
    /// The prefactor `λ_r` wanted after the double angles.
    pub final_prefactor: f64,
}

impl ScaledCosine {
    /// The prefactor `λ_0 = λ_r^{1/2^r}` of the interpolated cosine.
    pub fn prefactor(&self) -> f64 {
        self.final_prefactor
            .powf(1.0 / f64::from(1u32 << self.double_angles))
    }

    /// The function itself at `y`.
    pub fn function(&self, y: f64) -> f64 {
        let r = f64::from(1u32 << self.double_angles);
        self.prefactor() * (2.0 * PI * (self.k * y - 0.25) / r).cos()
    }

    /// Its degree-`degree` Chebyshev interpolant on `[−1, 1]`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a non-positive `K` or prefactor,
    /// [`Error::InvalidDegree`] for degree 0.
    pub fn chebyshev(&self, degree: usize) -> Result<Vec<f64>> {
        if !(self.k.is_finite() && self.k > 0.0) {
            return Err(Error::InvalidParameter {
                name: "K",
                reason: "must be finite and positive",
            });
        }
        if !(self.final_prefactor.is_finite() && self.final_prefactor > 0.0) {
            return Err(Error::InvalidParameter {
                name: "prefactor",
                reason: "must be finite and positive",
            });
        }
        if degree == 0 {
            return Err(Error::InvalidDegree { degree });
        }
        chebyshev::interpolate(|y| self.function(y), -1.0, 1.0, degree)
    }

    /// The constants `λ_i²` subtracted by the double angles, in order.
    pub fn double_angle_constants(&self) -> Vec<f64> {
        let mut lambda = self.prefactor();
        (0..self.double_angles)
            .map(|_| {
                let sq = lambda * lambda;
                lambda = sq;
                sq
            })
            .collect()
    }

    /// `Σ_{k > degree} |c_k|` of the exact Chebyshev series of the
    /// function. With `a = 2πK/2^r`, `b = −π/2^{r+1}`,
    /// `cos(a·y + b) = cos b·cos(a·y) − sin b·sin(a·y)` and the
    /// Jacobi–Anger expansions give `|c_k| = 2λ_0·|J_k(a)|·|cos b|` (even
    /// `k`) or `·|sin b|` (odd `k`). The interpolant's error is at most twice
    /// this tail (Trefethen, ATAP Thm 4.2), a bound that f64 evaluation
    /// cannot resolve once it is below `2^−50`.
    pub fn chebyshev_tail(&self, degree: usize) -> f64 {
        let r = f64::from(1u32 << self.double_angles);
        let a = 2.0 * PI * self.k / r;
        let b = -PI / (2.0 * r);
        let last = degree + 4 * (a as usize) + 100;
        let j = bessel_j(a, last);
        j.iter()
            .enumerate()
            .skip(degree + 1)
            .map(|(k, v)| {
                let trig = if k.is_multiple_of(2) {
                    b.cos()
                } else {
                    b.sin()
                };
                2.0 * self.prefactor() * (v * trig).abs()
            })
            .sum()
    }

    /// The largest factor by which the double angles amplify an error of
    /// the interpolated cosine: `Π_i 4λ_i` (the derivative `4c` of
    /// `2c² − λ²` at `|c| ≤ λ_i`).
    pub fn doubling_gain(&self) -> f64 {
        let mut lambda = self.prefactor();
        (0..self.double_angles)
            .map(|_| {
                let g = 4.0 * lambda;
                lambda *= lambda;
                g
            })
            .product()
    }

    /// Applies the double angles to `c ≈ λ_0·cos θ` in f64.
    pub fn apply_double_angles(&self, c: f64) -> f64 {
        self.double_angle_constants()
            .iter()
            .fold(c, |c, &l2| 2.0 * c * c - l2)
    }
}

/// `J_0(a) … J_max(a)` for `a > 0` by Miller's backward recurrence
/// `J_{k−1} = (2k/a)·J_k − J_{k+1}`, normalised with
/// `J_0 + 2·Σ J_{2k} = 1` (Abramowitz–Stegun 9.12; relative accuracy even
/// where `J_k(a)` is tiny).
pub fn bessel_j(a: f64, max: usize) -> Vec<f64> {
    let start = (max.max(a as usize) + 60 + (a.sqrt() as usize) * 10) | 1;
    let mut out = vec![0.0; max + 1];
    let mut next = 0.0f64; // J_{k+1}
    let mut cur = 1e-300f64; // J_k
    let mut norm = 0.0;
    let mut k = start;
    loop {
        if let Some(slot) = out.get_mut(k) {
            *slot = cur;
        }
        if k.is_multiple_of(2) {
            norm += if k == 0 { cur } else { 2.0 * cur };
        }
        if k == 0 {
            break;
        }
        let prev = 2.0 * k as f64 / a * cur - next;
        next = cur;
        cur = prev;
        k -= 1;
        if cur.abs() > 1e250 {
            cur *= 1e-250;
            next *= 1e-250;
            norm *= 1e-250;
            for v in out.iter_mut() {
                *v *= 1e-250;
            }
        }
    }
    for v in out.iter_mut() {
        *v /= norm;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn double_angles_turn_the_cosine_into_the_sine() {
        let cos = ScaledCosine {
            k: 12.0,
            double_angles: 3,
            final_prefactor: 1.0 / (2.0 * PI),
        };
        for i in 0..=200 {
            let y = -1.0 + i as f64 / 100.0;
            let x = cos.k * y;
            let s = cos.apply_double_angles(cos.function(y));
            assert!((s - (2.0 * PI * x).sin() / (2.0 * PI)).abs() < 1e-14);
        }
        let consts = cos.double_angle_constants();
        assert_eq!(consts.len(), 3);
        assert!((consts[2] - 1.0 / (2.0 * PI)).abs() < 1e-15);
        assert!(cos.chebyshev(0).is_err());
    }

    #[test]
    fn bessel_values_and_the_tail() {
        // J_0(1) = 0.7651976865579666, J_5(10) = −0.2340615281867936,
        // J_40(10) ≈ 1.5e-19 (A&S table 9.4 / series).
        let j = bessel_j(1.0, 3);
        assert!((j[0] - 0.765_197_686_557_966_6).abs() < 1e-15);
        let j = bessel_j(10.0, 40);
        assert!((j[5] + 0.234_061_528_186_793_6).abs() < 1e-14);
        let series: f64 = (0..20)
            .map(|m: i32| {
                let sign = if m % 2 == 0 { 1.0 } else { -1.0 };
                let mut term = sign * 5f64.powi(2 * m + 40);
                for i in 1..=m {
                    term /= f64::from(i);
                }
                for i in 1..=(m + 40) {
                    term /= f64::from(i);
                }
                term
            })
            .sum();
        assert!((j[40] / series - 1.0).abs() < 1e-10, "{} {}", j[40], series);
        // The tail bounds the measured interpolation error.
        let cos = ScaledCosine {
            k: 25.0,
            double_angles: 2,
            final_prefactor: 1.0 / (2.0 * PI),
        };
        let coeffs = cos.chebyshev(63).unwrap();
        let mut worst: f64 = 0.0;
        for i in 0..=4000 {
            let y = -1.0 + i as f64 / 2000.0;
            worst = worst.max((chebyshev::evaluate_unit(&coeffs, y) - cos.function(y)).abs());
        }
        let tail = cos.chebyshev_tail(63);
        assert!(
            worst <= 2.0 * tail && worst > tail / 4.0,
            "{worst:e} {tail:e}"
        );
    }
}
