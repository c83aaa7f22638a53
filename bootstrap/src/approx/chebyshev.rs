//! Chebyshev interpolation on `[a, b]` (Trefethen, *Approximation Theory
//! and Approximation Practice*, ch. 3–4): the interpolant at the `d + 1`
//! Chebyshev points of the first kind, whose coefficients are a discrete
//! cosine transform of the samples.

use std::f64::consts::PI;

use crate::{Error, Result};

/// The `degree + 1` Chebyshev points of the first kind on `[−1, 1]`,
/// `t_j = cos(π(j + ½)/(d + 1))`.
pub fn nodes(degree: usize) -> Vec<f64> {
    let m = (degree + 1) as f64;
    (0..=degree)
        .map(|j| (PI * (j as f64 + 0.5) / m).cos())
        .collect()
}

fn check_interval(a: f64, b: f64) -> Result<()> {
    if a.is_finite() && b.is_finite() && a < b {
        Ok(())
    } else {
        Err(Error::InvalidInterval { a, b })
    }
}

/// Maps `x ∈ [a, b]` to `t ∈ [−1, 1]`.
pub fn to_unit(x: f64, a: f64, b: f64) -> f64 {
    (2.0 * x - a - b) / (b - a)
}

/// The coefficients `c_0 … c_d` of the degree-`d` interpolant of `f` at the
/// Chebyshev points of `[a, b]`: `p(x) = Σ c_k T_k(t)`, `t` = [`to_unit`]`(x)`,
/// with `c_k = (2/(d+1)) Σ_j f(x_j) cos(πk(j+½)/(d+1))` (`c_0` halved).
///
/// # Errors
/// [`Error::InvalidInterval`] unless `a < b`, both finite;
/// [`Error::NonFinite`] if `f` is not finite at a node.
pub fn interpolate<F: Fn(f64) -> f64>(f: F, a: f64, b: f64, degree: usize) -> Result<Vec<f64>> {
    check_interval(a, b)?;
    let m = degree + 1;
    let samples: Vec<f64> = nodes(degree)
        .iter()
        .map(|&t| f(0.5 * (b - a) * t + 0.5 * (a + b)))
        .collect();
    if samples.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite);
    }
    Ok((0..m)
        .map(|k| {
            let sum: f64 = samples
                .iter()
                .enumerate()
                .map(|(j, &v)| v * (PI * k as f64 * (j as f64 + 0.5) / m as f64).cos())
                .sum();
            let c = 2.0 * sum / m as f64;
            if k == 0 { c / 2.0 } else { c }
        })
        .collect())
}

/// `Σ c_k T_k(t)` at `t` = [`to_unit`]`(x)`, by Clenshaw's recurrence.
pub fn evaluate(coefficients: &[f64], a: f64, b: f64, x: f64) -> f64 {
    evaluate_unit(coefficients, to_unit(x, a, b))
}

/// `Σ c_k T_k(t)` for `t ∈ [−1, 1]`, by Clenshaw's recurrence.
pub fn evaluate_unit(coefficients: &[f64], t: f64) -> f64 {
    let mut b1 = 0.0;
    let mut b2 = 0.0;
    for &c in coefficients.iter().skip(1).rev() {
        let b0 = 2.0 * t * b1 - b2 + c;
        b2 = b1;
        b1 = b0;
    }
    let c0 = coefficients.first().copied().unwrap_or(0.0);
    t * b1 - b2 + c0
}

/// The monomial coefficients (in `t`) of `Σ c_k T_k(t)`. Exact in
/// principle; in f64 only for small degrees (the conversion is
/// ill-conditioned beyond a few tens).
pub fn to_monomial(coefficients: &[f64]) -> Vec<f64> {
    let n = coefficients.len();
    let mut out = vec![0.0; n];
    // T_{k+1} = 2t·T_k − T_{k−1}, kept as monomial coefficient vectors.
    let mut prev = vec![0.0; n];
    let mut cur = vec![0.0; n];
    if let Some(first) = prev.first_mut() {
        *first = 1.0;
    }
    if let Some(second) = cur.get_mut(1) {
        *second = 1.0;
    }
    for (k, &c) in coefficients.iter().enumerate() {
        let basis = if k == 0 { &prev } else { &cur };
        for (o, &v) in out.iter_mut().zip(basis) {
            *o += c * v;
        }
        if k >= 1 {
            let mut next = vec![0.0; n];
            for (i, &v) in cur.iter().enumerate() {
                if let Some(slot) = next.get_mut(i + 1) {
                    *slot += 2.0 * v;
                }
            }
            for (slot, &v) in next.iter_mut().zip(&prev) {
                *slot -= v;
            }
            prev = std::mem::replace(&mut cur, next);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_smooth_functions_to_machine_precision() {
        let f = |x: f64| (3.0 * x).exp() * (5.0 * x).sin();
        let c = interpolate(f, -0.5, 2.0, 60).unwrap();
        let mut worst: f64 = 0.0;
        for i in 0..=1000 {
            let x = -0.5 + 2.5 * i as f64 / 1000.0;
            worst = worst.max((evaluate(&c, -0.5, 2.0, x) - f(x)).abs());
        }
        assert!(worst < 1e-11, "{worst}");
        // A polynomial is reproduced exactly, coefficients included:
        // x³ = (3T_1 + T_3)/4.
        let c = interpolate(|x| x * x * x, -1.0, 1.0, 5).unwrap();
        for (got, want) in c.iter().zip([0.0, 0.75, 0.0, 0.25, 0.0, 0.0]) {
            assert!((got - want).abs() < 1e-14);
        }
        let m = to_monomial(&c);
        for (got, want) in m.iter().zip([0.0, 0.0, 0.0, 1.0, 0.0, 0.0]) {
            assert!((got - want).abs() < 1e-14);
        }
        assert!(matches!(
            interpolate(f, 1.0, 1.0, 3),
            Err(Error::InvalidInterval { .. })
        ));
        assert!(matches!(
            interpolate(|x| (x - 2.0).sqrt(), -1.0, 1.0, 4),
            Err(Error::NonFinite)
        ));
    }
}
