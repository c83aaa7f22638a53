//! The error of an approximate modular reduction in x-units.
//!
//! EvalMod receives `x = I + ε` with `I` an integer, `|I| < K`, and
//! `|ε| ≤ 2^−ρ` (ε = w·Δ0/q0 for a slot value `|w| ≤ 1`); it should return
//! `ε`. Two errors matter (BOOTSTRAP-NOTES §3.2–3.3):
//! - the **approximation error** `|f(x) − sin(2πx)/(2π)|`, what the
//!   polynomial and double angles add on top of the sine (for a circuit
//!   with an arcsine, against `ε` itself);
//! - the **total error** `|f(x) − ε|`, which adds the sine's own
//!   `(2πε)³/(6·2π)` unless an arcsine removes it.

use std::f64::consts::PI;

/// Where and how large the error of a modular reduction is.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModErrorReport {
    /// Max `|f(x) − sin(2πx)/(2π)|` (x-units).
    pub versus_sine: f64,
    /// Max `|f(x) − ε|` (x-units).
    pub versus_identity: f64,
    /// The `x` where `versus_sine` is reached.
    pub worst_x: f64,
}

impl ModErrorReport {
    /// `log2` of [`ModErrorReport::versus_sine`].
    pub fn versus_sine_log2(&self) -> f64 {
        self.versus_sine.log2()
    }

    /// `log2` of [`ModErrorReport::versus_identity`].
    pub fn versus_identity_log2(&self) -> f64 {
        self.versus_identity.log2()
    }
}

/// Measures `f` (x-units in, x-units out) at `x = I + ε` for every integer
/// `|I| ≤ K − 1` and `2·samples + 1` equally spaced `ε ∈ [−eps, eps]`
/// (ends included).
pub fn mod_reduction_error<F: Fn(f64) -> f64>(
    f: F,
    k: u32,
    eps: f64,
    samples: usize,
) -> ModErrorReport {
    let mut report = ModErrorReport::default();
    let k = i64::from(k);
    let samples = samples.max(1) as i64;
    for i in -(k - 1)..=(k - 1) {
        for s in -samples..=samples {
            let e = eps * s as f64 / samples as f64;
            let x = i as f64 + e;
            let v = f(x);
            let sine = (2.0 * PI * e).sin() / (2.0 * PI);
            let vs = (v - sine).abs();
            if vs > report.versus_sine || !vs.is_finite() {
                report.versus_sine = vs;
                report.worst_x = x;
            }
            report.versus_identity = report.versus_identity.max((v - e).abs());
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_sine_has_only_the_sine_error() {
        let eps = 2f64.powi(-10);
        let r = mod_reduction_error(|x| (2.0 * PI * x).sin() / (2.0 * PI), 8, eps, 64);
        assert!(r.versus_sine < 1e-14);
        // (2πε)³/(6·2π) = 6.58·ε³.
        let sine_error = (2.0 * PI).powi(2) / 6.0 * eps.powi(3);
        assert!((r.versus_identity / sine_error - 1.0).abs() < 1e-3);
    }
}
