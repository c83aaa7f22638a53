//! The choices that shape a bootstrap for each preset (`ρ`, the EvalMod
//! circuit, sparse-secret encapsulation; BOOTSTRAP-NOTES §3–4,
//! docs/BOOTSTRAP-SCHEDULE.md) and the preset a parameter set's structure
//! is.

use std::f64::consts::PI;

use hemem_ckks::params::{Parameters, Preset};

use crate::approx::arcsine::ArcsineFit;
use crate::eval_mod::EvalModConfig;
use crate::{Error, Result};

/// The choices that shape a bootstrap: `ρ`, EvalMod, sparse-secret
/// encapsulation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScheduleChoice {
    /// `ρ = log2(q0/Δ0)`.
    pub rho: u32,
    /// The EvalMod circuit.
    pub eval_mod: EvalModConfig,
    /// Whether ModRaise runs under an ephemeral sparse secret (SSE,
    /// Bossuat et al. ePrint 2022/024); then `K` is sized for `h = 32`.
    pub sse: bool,
}

/// Hamming weight of the ephemeral secret under sparse-secret
/// encapsulation (Lattigo's default, BOOTSTRAP-NOTES §3.1).
pub const SSE_HAMMING_WEIGHT: usize = 32;

/// The arcsine fit used by the schedules: interpolated on
/// `[−sin(2π·1.0625·2^−ρ), +…]` (a 6 % margin for noise).
pub fn arcsine_fit(rho: u32) -> ArcsineFit {
    ArcsineFit::Interpolated {
        s_max: (2.0 * PI * 1.0625 * 2f64.powi(-(rho as i32))).sin(),
    }
}

/// BOOTSTRAP-NOTES §4's choice for a preset shape (with the arcsine fitted
/// by interpolation rather than Taylor; option A, the Han–Ki multi-interval
/// fit, is replaced by a continuous Chebyshev fit of the same depth).
pub fn notes_choice(shape: Preset) -> ScheduleChoice {
    let c = |k| EvalModConfig::cosine(k, 63, 3);
    let a = EvalModConfig::cosine(16, 31, 3);
    match shape.shape_of() {
        Preset::FGb => ScheduleChoice {
            rho: 14,
            eval_mod: c(32),
            sse: false,
        },
        Preset::FGa => ScheduleChoice {
            rho: 10,
            eval_mod: c(32).with_arcsine(3, arcsine_fit(10)),
            sse: false,
        },
        Preset::FVa => ScheduleChoice {
            rho: 9,
            eval_mod: a.with_arcsine(3, arcsine_fit(9)),
            sse: true,
        },
        Preset::FVb | Preset::FVc => ScheduleChoice {
            rho: 7,
            eval_mod: c(33).with_arcsine(7, arcsine_fit(7)),
            sse: false,
        },
        Preset::FTa => ScheduleChoice {
            rho: 8,
            eval_mod: a,
            sse: true,
        },
        _ => ScheduleChoice {
            rho: 11,
            eval_mod: a,
            sse: true,
        },
    }
}

/// The choice this crate recommends after simulating the whole bootstrap
/// (`docs/BOOTSTRAP-SCHEDULE.md`, "Simulated precision"):
/// - the cosine is a continuous Chebyshev fit of the same depth as the
///   notes' option (degree 63 with two double angles replaces option A's
///   Han–Ki fit under SSE);
/// - **FGb needs SSE** too: without it the simulation stays near 22.5 bits
///   (target 23), with it 24 bits;
/// - FGa: `K = 40`, degree 127, two double angles (failure `2^−63.5`
///   instead of `2^−34.8`), `ρ = 9`;
/// - FVa `ρ = 7`, FVb/FVc `ρ = 6`: the interpolated arcsine lets `ρ` drop
///   until CoeffToSlot's quantisation and the noise balance.
pub fn recommended_choice(shape: Preset) -> ScheduleChoice {
    let sse_cosine = EvalModConfig::cosine(16, 63, 2);
    let notes = notes_choice(shape);
    match shape.shape_of() {
        Preset::FGb => ScheduleChoice {
            rho: 14,
            eval_mod: sse_cosine,
            sse: true,
        },
        Preset::FGa => ScheduleChoice {
            rho: 9,
            eval_mod: EvalModConfig::cosine(40, 127, 2).with_arcsine(3, arcsine_fit(9)),
            sse: false,
        },
        Preset::FVa => ScheduleChoice {
            rho: 7,
            eval_mod: sse_cosine.with_arcsine(3, arcsine_fit(7)),
            sse: true,
        },
        Preset::FVb | Preset::FVc => ScheduleChoice {
            rho: 6,
            eval_mod: EvalModConfig::cosine(33, 63, 3).with_arcsine(7, arcsine_fit(6)),
            sse: false,
        },
        Preset::FTa | Preset::FTb => ScheduleChoice {
            eval_mod: sse_cosine,
            ..notes
        },
        _ => notes,
    }
}

/// The best choice found without sparse-secret encapsulation for the
/// presets whose recommendation uses it (FGb, FVa, FTa, FTb); `None` for
/// the others.
pub fn without_sse_choice(shape: Preset) -> Option<ScheduleChoice> {
    match shape.shape_of() {
        // h = 192 at N = 2^16: K = 40 for failure 2^−63.5.
        Preset::FGb => Some(ScheduleChoice {
            rho: 13,
            eval_mod: EvalModConfig::cosine(40, 63, 3),
            sse: false,
        }),
        // h = 64 at N = 2^17: K = 23 for failure 2^−64; one level spare.
        Preset::FVa => Some(ScheduleChoice {
            rho: 11,
            eval_mod: EvalModConfig::cosine(23, 63, 3),
            sse: false,
        }),
        // h = 192 at N = 2^15: 8 levels hold K = 25 at degree 127 with one
        // double angle (failure 2^−16.6, as the notes' option B).
        Preset::FTa => Some(ScheduleChoice {
            rho: 7,
            eval_mod: EvalModConfig::cosine(25, 127, 1),
            sse: false,
        }),
        Preset::FTb => Some(ScheduleChoice {
            rho: 11,
            eval_mod: EvalModConfig::cosine(25, 127, 1),
            sse: false,
        }),
        _ => None,
    }
}

/// The HEaaN preset whose structure `params` has, at any ring degree and
/// under any name: the same prime sizes (Q and P, in order), gadget rank,
/// encryption and post-bootstrap levels and secret weight. The test
/// variants (`test-FGb`, …) and [`ParametersSpec::with_log_n`](hemem_ckks::params::ParametersSpec::with_log_n)
/// descriptions give their HEaaN preset; the name is not read.
///
/// # Errors
/// [`Error::NotBootstrappable`] for parameters of no preset's structure
/// (among them any without a post-bootstrap level).
pub fn preset_of(params: &Parameters) -> Result<Preset> {
    let spec = params.spec();
    Preset::HEAAN
        .into_iter()
        .find(|preset| {
            let own = preset.spec();
            own.q_bits == spec.q_bits
                && own.p_bits == spec.p_bits
                && own.dnum == spec.dnum
                && own.enc_level == spec.enc_level
                && own.post_bootstrap_level == spec.post_bootstrap_level
                && own.hamming_weight == spec.hamming_weight
        })
        .ok_or_else(|| Error::NotBootstrappable {
            name: params.name().to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::BootstrapSchedule;
    use hemem_ckks::params::SecurityCheck;

    #[test]
    fn the_preset_is_found_by_structure_not_name() {
        let fgb = Parameters::from_preset(Preset::FGb).unwrap();
        let expected = BootstrapSchedule::recommended(&fgb).unwrap();
        // Renamed, and at a smaller degree: FGb's structure still.
        let mut spec = Preset::FGb.spec().with_log_n(12);
        spec.name = "my parameters".into();
        let small = Parameters::new(spec, SecurityCheck::AllowInsecure).unwrap();
        assert_eq!(preset_of(&small).unwrap(), Preset::FGb);
        let s = BootstrapSchedule::recommended(&small).unwrap();
        assert_eq!(
            (s.choice, s.post_level),
            (expected.choice, expected.post_level)
        );
        // Named FGb, with another structure: not FGb.
        let mut spec = Preset::FGa.spec().with_log_n(12);
        spec.name = "FGb".into();
        let fga = Parameters::new(spec, SecurityCheck::AllowInsecure).unwrap();
        assert_eq!(preset_of(&fga).unwrap(), Preset::FGa);
        let mut spec = Preset::FGb.spec().with_log_n(12);
        spec.name = "FGb".into();
        spec.hamming_weight = 64;
        let custom = Parameters::new(spec, SecurityCheck::AllowInsecure).unwrap();
        assert!(matches!(
            BootstrapSchedule::recommended(&custom),
            Err(Error::NotBootstrappable { .. })
        ));
    }
}
