//! The arcsine correction after the sine (Lee et al., ePrint 2020/552 §4):
//! `arcsin(sin 2πε)/(2π) = ε` for `|ε| < ¼`, so an odd polynomial close to
//! `arcsin(s)/(2π)` on the small range of `s` the messages reach removes
//! the sine's relative error `(2πε)²/6`.

use std::f64::consts::PI;

use super::chebyshev;
use crate::{Error, Result};

/// How the arcsine polynomial is fitted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArcsineFit {
    /// The Taylor series `s + s³/6 + 3s⁵/40 + …` truncated at the degree:
    /// remainder ≈ `117·ε⁵` (degree 3) and `2^16.2·ε⁹` (degree 7) in
    /// x-units for `ε = w·2^−ρ` (BOOTSTRAP-NOTES §3.2, options D and E).
    Taylor,
    /// Chebyshev interpolation of `arcsin` on `[−s_max, s_max]`, made odd:
    /// near-minimax on the range the messages reach, about `2^{1−d}` times
    /// the Taylor remainder at `s_max` for degree `d`.
    Interpolated {
        /// The largest `|s|` the fit must cover, `sin(2π·2^−ρ)` plus a
        /// margin for noise.
        s_max: f64,
    },
}

/// The Taylor coefficient of `s^{2k+1}` in `arcsin(s)`:
/// `(2k)! / (4^k (k!)² (2k+1))`.
fn taylor_coefficient(k: usize) -> f64 {
    let mut c = 1.0;
    for i in 1..=k {
        // (2i)(2i−1)/(4 i²) = (2i−1)/(2i)
        c *= (2 * i - 1) as f64 / (2 * i) as f64;
    }
    c / (2 * k + 1) as f64
}

/// The monomial coefficients (`a_0 … a_degree`, even ones zero) of an odd
/// polynomial close to `scale·arcsin(s)`.
///
/// # Errors
/// [`Error::InvalidDegree`] for an even or zero degree,
/// [`Error::InvalidParameter`] for `s_max` outside `(0, 1)`.
pub fn arcsine_polynomial(degree: usize, fit: ArcsineFit, scale: f64) -> Result<Vec<f64>> {
    if degree == 0 || degree.is_multiple_of(2) {
        return Err(Error::InvalidDegree { degree });
    }
    let mut out = vec![0.0; degree + 1];
    match fit {
        ArcsineFit::Taylor => {
            for (k, slot) in out.iter_mut().skip(1).step_by(2).enumerate() {
                *slot = scale * taylor_coefficient(k);
            }
        }
        ArcsineFit::Interpolated { s_max } => {
            if !(s_max > 0.0 && s_max < 1.0) {
                return Err(Error::InvalidParameter {
                    name: "s_max",
                    reason: "must lie in (0, 1)",
                });
            }
            let mut c = chebyshev::interpolate(|t| (t * s_max).asin(), -1.0, 1.0, degree)?;
            for v in c.iter_mut().step_by(2) {
                *v = 0.0;
            }
            let mono = chebyshev::to_monomial(&c);
            for (j, (slot, m)) in out.iter_mut().zip(mono).enumerate() {
                *slot = scale * m / s_max.powi(j as i32);
            }
        }
    }
    Ok(out)
}

/// `arcsin(s)/(2π)` polynomial in the monomial basis for EvalMod.
///
/// # Errors
/// As [`arcsine_polynomial`].
pub fn eval_mod_arcsine(degree: usize, fit: ArcsineFit) -> Result<Vec<f64>> {
    arcsine_polynomial(degree, fit, 1.0 / (2.0 * PI))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn horner(c: &[f64], x: f64) -> f64 {
        c.iter().rev().fold(0.0, |acc, &a| acc * x + a)
    }

    #[test]
    fn taylor_remainders_match_the_notes() {
        // Option D: degree 3 leaves ≈ 117·ε⁵; option E: degree 7 leaves
        // ≈ 2^16.2·ε⁹ (x-units, ε = w·2^−ρ).
        let d3 = eval_mod_arcsine(3, ArcsineFit::Taylor).unwrap();
        let d7 = eval_mod_arcsine(7, ArcsineFit::Taylor).unwrap();
        let eps = 2f64.powi(-10);
        let s = (2.0 * PI * eps).sin();
        let r3 = (eps - horner(&d3, s)) / eps.powi(5);
        // Degree 7 needs a larger ε for f64 to resolve the remainder.
        let eps = 2f64.powi(-6);
        let s = (2.0 * PI * eps).sin();
        let r7 = (eps - horner(&d7, s)) / eps.powi(9);
        assert!((r3 - 116.9).abs() < 0.5, "{r3}");
        assert!((r7.log2() - 16.2).abs() < 0.05, "{}", r7.log2());
        assert!(matches!(
            eval_mod_arcsine(4, ArcsineFit::Taylor),
            Err(Error::InvalidDegree { .. })
        ));
    }

    #[test]
    fn interpolated_fit_beats_taylor_on_its_range() {
        let eps_max = 2f64.powi(-8);
        let s_max = (2.0 * PI * eps_max).sin();
        for degree in [3usize, 7] {
            let taylor = eval_mod_arcsine(degree, ArcsineFit::Taylor).unwrap();
            let fit = eval_mod_arcsine(degree, ArcsineFit::Interpolated { s_max }).unwrap();
            let mut worst_t: f64 = 0.0;
            let mut worst_f: f64 = 0.0;
            for i in -500..=500 {
                let eps = eps_max * i as f64 / 500.0;
                let s = (2.0 * PI * eps).sin();
                worst_t = worst_t.max((horner(&taylor, s) - eps).abs());
                worst_f = worst_f.max((horner(&fit, s) - eps).abs());
            }
            assert!(
                worst_f < worst_t / 4.0,
                "degree {degree}: {worst_f} vs {worst_t}"
            );
        }
    }
}
