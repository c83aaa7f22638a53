//! EvalMod: the approximate reduction modulo 1 of bootstrapping, composed
//! from the scaled cosine ([`crate::approx::cosine`]), double angles and an
//! optional arcsine ([`crate::approx::arcsine`]), evaluated with
//! [`crate::poly_eval`]; and the stage around it in a bootstrap:
//! [`split`] of CoeffToSlot's output into real and imaginary parts before
//! it, [`eval_mod_and_recombine`] after.
//!
//! # Conventions (BOOTSTRAP-NOTES §4)
//!
//! The input slots hold `y = x/K` with `x = I + ε` in x-units (`I` an
//! integer, `|I| < K`; `ε = w·Δ0/q0 = w·2^−ρ`) at scale `S_em`;
//! CoeffToSlot folds the `1/K`. The output holds `≈ ε` (the plain sine
//! gives `sin(2πε)/(2π)`, the arcsine removes the difference) at exactly
//! the requested scale; read at `target/2^ρ` it is `w`.
//!
//! Levels: `⌈log2(d_cos + 1)⌉ + r + ⌈log2(d_asin + 1)⌉`, as Lattigo's
//! `circuits/ckks/mod1` counts them. Without arcsine the double angles are
//! steered backwards from the target (`s_i = √(s_{i+1}·q)`), as Lattigo's
//! `mod1_evaluator.go` does, so the cosine polynomial is evaluated at
//! exactly the scale that makes the last double angle land on the target;
//! with an arcsine the double angles run at scales near the primes and the
//! arcsine polynomial lands on the target.

use std::f64::consts::PI;

use num_complex::Complex64;

use crate::approx::arcsine::{self, ArcsineFit};
use crate::approx::chebyshev;
use crate::approx::cosine::ScaledCosine;
use crate::approx::error::{ModErrorReport, mod_reduction_error};
use crate::arith::{AtLevel, SlotArithmetic, product_rescaled};
use crate::poly_eval::{self, Polynomial, depth_for_degree};
use crate::{Error, Result};

/// The arcsine stage of EvalMod.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArcsineStage {
    /// Its (odd) degree: 3 (two levels) or 7 (three levels) in the notes.
    pub degree: usize,
    /// How it is fitted.
    pub fit: ArcsineFit,
}

/// The shape of an EvalMod circuit (BOOTSTRAP-NOTES §3.2 options B–E).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvalModConfig {
    /// The bound `K` on `|I|` (the input is `y = x/K`).
    pub k: u32,
    /// Degree of the Chebyshev interpolant of the scaled cosine.
    pub cosine_degree: usize,
    /// Number `r` of double angles.
    pub double_angles: u32,
    /// The optional arcsine.
    pub arcsine: Option<ArcsineStage>,
}

impl EvalModConfig {
    /// Cosine of degree `cosine_degree` on `[−K, K]` with `r` double
    /// angles, no arcsine (options B and C).
    pub fn cosine(k: u32, cosine_degree: usize, double_angles: u32) -> Self {
        Self {
            k,
            cosine_degree,
            double_angles,
            arcsine: None,
        }
    }

    /// The same with an arcsine of `degree` (options D: 3, E: 7).
    pub fn with_arcsine(mut self, degree: usize, fit: ArcsineFit) -> Self {
        self.arcsine = Some(ArcsineStage { degree, fit });
        self
    }

    /// Levels consumed.
    pub fn depth(&self) -> usize {
        depth_for_degree(self.cosine_degree)
            + self.double_angles as usize
            + self.arcsine.map_or(0, |a| depth_for_degree(a.degree))
    }
}

/// An EvalMod circuit with its fitted polynomials.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalMod {
    config: EvalModConfig,
    cosine: ScaledCosine,
    cosine_poly: Polynomial,
    arcsine_poly: Option<Polynomial>,
}

/// The highest cosine or arcsine degree [`EvalMod::new`] fits: `2^12 − 1`,
/// twelve levels for the polynomial alone, more than any parameters leave
/// EvalMod (the presets use 63 and 127); fitting is quadratic in the
/// degree, and `usize::MAX` overflowed the fit's node count.
pub const MAX_DEGREE: usize = (1 << 12) - 1;

impl EvalMod {
    /// Fits the polynomials of `config`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for `K = 0` or more than 30 double
    /// angles, [`Error::InvalidDegree`] for a zero cosine degree, an even
    /// arcsine degree, or either above [`MAX_DEGREE`].
    pub fn new(config: EvalModConfig) -> Result<Self> {
        for degree in [config.cosine_degree]
            .into_iter()
            .chain(config.arcsine.map(|a| a.degree))
        {
            if degree > MAX_DEGREE {
                return Err(Error::InvalidDegree { degree });
            }
        }
        if config.k == 0 {
            return Err(Error::InvalidParameter {
                name: "K",
                reason: "must be positive",
            });
        }
        if config.double_angles > 30 {
            return Err(Error::InvalidParameter {
                name: "double_angles",
                reason: "at most 30",
            });
        }
        let final_prefactor = if config.arcsine.is_some() {
            1.0
        } else {
            1.0 / (2.0 * PI)
        };
        let cosine = ScaledCosine {
            k: f64::from(config.k),
            double_angles: config.double_angles,
            final_prefactor,
        };
        let cosine_poly =
            Polynomial::chebyshev(-1.0, 1.0, cosine.chebyshev(config.cosine_degree)?)?;
        let arcsine_poly = config
            .arcsine
            .map(|a| arcsine::eval_mod_arcsine(a.degree, a.fit).and_then(Polynomial::monomial))
            .transpose()?;
        Ok(Self {
            config,
            cosine,
            cosine_poly,
            arcsine_poly,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &EvalModConfig {
        &self.config
    }

    /// The cosine polynomial (Chebyshev on `[−1, 1]` in `y`).
    pub fn cosine_polynomial(&self) -> &Polynomial {
        &self.cosine_poly
    }

    /// The arcsine polynomial (monomial in the sine), if any.
    pub fn arcsine_polynomial(&self) -> Option<&Polynomial> {
        self.arcsine_poly.as_ref()
    }

    /// Levels consumed.
    pub fn depth(&self) -> usize {
        self.config.depth()
    }

    /// The same circuit in f64 at `y = x/K` (x-units out).
    pub fn evaluate_f64(&self, y: f64) -> f64 {
        let c = chebyshev::evaluate_unit(self.cosine_poly.coefficients(), y);
        let s = self.cosine.apply_double_angles(c);
        match &self.arcsine_poly {
            Some(p) => p.evaluate_f64(s),
            None => s,
        }
    }

    /// The error of the f64 circuit in x-units around every integer
    /// `|I| ≤ K − 1` at `|ε| ≤ eps` (see
    /// [`crate::approx::error::mod_reduction_error`]).
    pub fn approximation_error(&self, eps: f64, samples: usize) -> ModErrorReport {
        let k = f64::from(self.config.k);
        mod_reduction_error(|x| self.evaluate_f64(x / k), self.config.k, eps, samples)
    }

    /// A bound on the approximation error in x-units without f64 rounding:
    /// twice the exact Chebyshev tail of the cosine
    /// ([`ScaledCosine::chebyshev_tail`]) times the double angles' gain,
    /// divided by `2π` after an arcsine (whose slope at 0 is `1/(2π)`).
    pub fn approximation_bound(&self) -> f64 {
        let b = 2.0
            * self.cosine.chebyshev_tail(self.config.cosine_degree)
            * self.cosine.doubling_gain();
        if self.arcsine_poly.is_some() {
            b / (2.0 * PI)
        } else {
            b
        }
    }

    /// EvalMod on `y` (slots `x/K`), landing on `target_scale` exactly at
    /// level `level(y) − depth`.
    ///
    /// # Errors
    /// [`Error::LevelTooLow`] for an input with too few levels, and the
    /// errors of `ops` and [`poly_eval::evaluate`].
    pub fn evaluate<A: SlotArithmetic>(
        &self,
        ops: &A,
        y: &A::Value,
        target_scale: f64,
    ) -> Result<A::Value> {
        let level = ops.level(y);
        if level < self.depth() {
            return Err(Error::LevelTooLow {
                operation: "EvalMod",
                needed: self.depth(),
                level,
            });
        }
        let cos_depth = depth_for_degree(self.config.cosine_degree);
        let r = self.config.double_angles as usize;
        let first_doubling = level - cos_depth;
        let cos_target = if self.arcsine_poly.is_some() || r == 0 {
            if r == 0 && self.arcsine_poly.is_none() {
                target_scale
            } else {
                ops.prime(first_doubling)? as f64
            }
        } else {
            let mut s = target_scale;
            for i in (0..r).rev() {
                let q = ops.prime(first_doubling - i)? as f64;
                s = (s * q).sqrt();
            }
            s
        };
        let mut c = poly_eval::evaluate(ops, y, &self.cosine_poly, cos_target)?;
        for lambda_sq in self.cosine.double_angle_constants() {
            // 2·c² as (2c)·c: relinearised and rescaled in one step.
            let doubled = AtLevel::Lower(ops.mul_integer(&c, 2)?);
            let r = product_rescaled(ops, doubled, &c, None)?;
            c = ops.add_const(&r, Complex64::new(-lambda_sq, 0.0))?;
        }
        match &self.arcsine_poly {
            Some(p) => poly_eval::evaluate(ops, &c, p, target_scale),
            None => Ok(c),
        }
    }
}

/// Splits `v = (a + ib)/(2K)` into `Re = v + v̄ = a/K` and
/// `Im = −i(v − v̄) = b/K` with one conjugation (BOOTSTRAP-NOTES §1,
/// step 6). With `real_only`, `Im` is not computed.
///
/// # Errors
/// The errors of `ops`.
pub fn split<A: SlotArithmetic>(
    ops: &A,
    v: &A::Value,
    real_only: bool,
) -> Result<(A::Value, Option<A::Value>)> {
    let conj = ops.conjugate(v)?;
    let re = ops.add(v, &conj)?;
    let im = if real_only {
        None
    } else {
        let d = ops.sub(v, &conj)?;
        Some(ops.mul_const(&d, Complex64::new(0.0, -1.0), 1.0)?)
    };
    Ok((re, im))
}

/// EvalMod on `Re` (and `Im`), landing on `s_x`, down to `post_level`,
/// recombined as `Re′ + i·Im′` and relabelled to `output_scale`.
///
/// # Errors
/// The errors of `ops` and [`EvalMod::evaluate`].
pub fn eval_mod_and_recombine<A: SlotArithmetic>(
    ops: &A,
    eval_mod: &EvalMod,
    re: &A::Value,
    im: Option<&A::Value>,
    s_x: f64,
    post_level: usize,
    output_scale: f64,
) -> Result<A::Value> {
    let re = eval_mod.evaluate(ops, re, s_x)?;
    let re = ops.level_down(&re, post_level)?;
    let out = match im {
        None => re,
        Some(im) => {
            let im = eval_mod.evaluate(ops, im, s_x)?;
            let im = ops.level_down(&im, post_level)?;
            let im = ops.mul_const(&im, Complex64::new(0.0, 1.0), 1.0)?;
            ops.add(&re, &im)?
        }
    };
    ops.set_scale(&out, output_scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arith::{NoiseModel, PlainSimulator};
    use hemem_ckks::params::{Parameters, Preset};
    use hemem_ckks::testing::{seeded_rng, unit_interval};
    use rand_core::Rng;

    /// One integer from the Irwin–Hall law of `h + 1` terms, rounded.
    fn irwin_hall(rng: &mut rand_chacha::ChaCha20Rng, h: usize) -> i64 {
        let s: f64 = (0..=h)
            .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 - 0.5)
            .sum();
        s.round() as i64
    }

    /// One integer from the Irwin–Hall tail `|I| ≥ 2σ` (rejection).
    fn irwin_hall_tail(rng: &mut rand_chacha::ChaCha20Rng, h: usize) -> i64 {
        let two_sigma = (2.0 * ((h + 1) as f64 / 12.0).sqrt()).ceil() as i64;
        loop {
            let i = irwin_hall(rng, h);
            if i.abs() >= two_sigma {
                return i;
            }
        }
    }

    fn run(
        preset: Preset,
        config: EvalModConfig,
        rho: i32,
        noise: bool,
        seed: u64,
    ) -> (f64, usize, f64, f64) {
        let params = Parameters::from_preset(preset).unwrap();
        let mut sim = PlainSimulator::new(&params);
        if noise {
            sim = sim.with_noise(NoiseModel::for_parameters(&params), seed);
        }
        let em = EvalMod::new(config).unwrap();
        let mut rng = seeded_rng(seed);
        let n = 1 << 12;
        let k = config.k as i64;
        let w = unit_interval(&mut rng, n);
        // A third of the slots at ±(K−1), a third from the Irwin–Hall tail
        // (|I| ≥ 2σ), a third from its bulk (I near 0, where the power
        // basis amplifies noise most); w uniform in [−1, 1], |w| = 1 too.
        let h = params.hamming_weight();
        let eps = 2f64.powi(-rho);
        let mut w = w;
        w[0] = 1.0;
        w[1] = -1.0;
        let y: Vec<Complex64> = w
            .iter()
            .enumerate()
            .map(|(j, &wj)| {
                let i = match j % 3 {
                    0 if j % 2 == 0 => k - 1,
                    0 => 1 - k,
                    1 => irwin_hall_tail(&mut rng, h).clamp(1 - k, k - 1),
                    _ => irwin_hall(&mut rng, h).clamp(1 - k, k - 1),
                };
                Complex64::new((i as f64 + wj * eps) / config.k as f64, 0.0)
            })
            .collect();
        let top = params.max_level().0;
        let level = top - 3;
        let s_em = sim.prime(level).unwrap() as f64;
        let x = sim.value(&y, level, s_em).unwrap();
        let post = params.post_bootstrap_level().unwrap().0;
        let out_level = level - em.depth();
        let target = params
            .default_scale(hemem_ckks::params::Level(post))
            .unwrap()
            .0
            / eps;
        let out = em.evaluate(&sim, &x, target).unwrap();
        let err = out
            .values()
            .iter()
            .zip(&w)
            .map(|(o, &wj)| (o.re / eps - wj).abs().max(o.im.abs() / eps))
            .fold(0.0, f64::max);
        (
            err,
            out_level,
            out.scale() / target - 1.0,
            out.level() as f64,
        )
    }

    #[test]
    fn option_c_on_fgb_reaches_the_estimate() {
        // FGb, ρ = 14, K = 32, d = 63, r = 3: 9 levels from 21 down to 12.
        let config = EvalModConfig::cosine(32, 63, 3);
        assert_eq!(config.depth(), 9);
        let (err, out_level, rel, level) = run(Preset::FGb, config, 14, false, 51);
        assert_eq!(out_level, 12);
        assert_eq!(level, 12.0);
        assert!(rel.abs() < 2f64.powi(-40));
        // Noiseless: the sine error 6.58·w³·2^−2ρ dominates (2^−25.3).
        assert!(
            err < 2f64.powf(-25.0) && err > 2f64.powf(-26.0),
            "{}",
            err.log2()
        );
        // EvalMod's own noise (its input is noiseless here) costs about a
        // bit; CoeffToSlot's output noise costs more (see simulate).
        let (err, ..) = run(Preset::FGb, config, 14, true, 52);
        assert!(err < 2f64.powf(-24.0), "{}", err.log2());
    }

    #[test]
    fn option_d_on_fga_removes_the_sine_error() {
        let config = EvalModConfig::cosine(32, 63, 3).with_arcsine(3, ArcsineFit::Taylor);
        assert_eq!(config.depth(), 11);
        let (err, out_level, rel, _) = run(Preset::FGa, config, 10, false, 53);
        assert_eq!(out_level, 9);
        assert!(rel.abs() < 2f64.powi(-40));
        // Remainder 117·w⁵·2^−4ρ = 2^−33.1.
        assert!(err < 2f64.powf(-32.5), "{}", err.log2());
    }

    #[test]
    fn option_e_on_fvb_reaches_31_bits() {
        // ρ = 6 with an interpolated degree-7 arcsine: the approximation is
        // below 2^−43 in x-units, so noise sets the precision.
        let config = EvalModConfig::cosine(33, 63, 3).with_arcsine(
            7,
            ArcsineFit::Interpolated {
                s_max: (2.0 * PI * 1.0625 / 64.0).sin(),
            },
        );
        assert_eq!(config.depth(), 12);
        let (err, out_level, rel, _) = run(Preset::FVb, config, 6, false, 55);
        assert_eq!(out_level, 14);
        assert!(rel.abs() < 2f64.powi(-40));
        assert!(err < 2f64.powf(-36.0), "{}", err.log2());
        let (err, ..) = run(Preset::FVb, config, 6, true, 56);
        assert!(err < 2f64.powf(-31.0), "{}", err.log2());
    }

    #[test]
    fn approximation_errors_of_option_c() {
        let em = EvalMod::new(EvalModConfig::cosine(32, 63, 3)).unwrap();
        let report = em.approximation_error(2f64.powi(-14), 8);
        assert!(
            report.versus_sine < 2f64.powi(-44),
            "{}",
            report.versus_sine_log2()
        );
        let refused = EvalMod::new(EvalModConfig::cosine(0, 63, 3));
        assert!(matches!(refused, Err(Error::InvalidParameter { .. })));
        // Degrees past any level budget are refused before fitting
        // (usize::MAX overflowed the node count; 2^40 would not fit).
        for degree in [MAX_DEGREE + 1, 1 << 40, usize::MAX] {
            assert!(matches!(
                EvalMod::new(EvalModConfig::cosine(16, degree, 2)),
                Err(Error::InvalidDegree { degree: d }) if d == degree
            ));
            assert!(matches!(
                EvalMod::new(
                    EvalModConfig::cosine(16, 63, 2).with_arcsine(degree, ArcsineFit::Taylor)
                ),
                Err(Error::InvalidDegree { degree: d }) if d == degree
            ));
        }
    }
}
