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

    /// Applies the double angles to `c ≈ λ_0·cos θ` in f64.
    pub fn apply_double_angles(&self, c: f64) -> f64 {
        self.double_angle_constants()
            .iter()
            .fold(c, |c, &l2| 2.0 * c * c - l2)
    }
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
}
