//! The level and scale schedule of a SlotToCoeff-first bootstrap for each
//! preset (BOOTSTRAP-NOTES §1, §4; written out in
//! `docs/BOOTSTRAP-SCHEDULE.md`).
//!
//! ```text
//! input (level ≥ 3, Δ_in) ─level_down→ 3 ─StC 3→0→ Δ0 = q0·2^−ρ
//!   ─ModRaise→ level L, scale q0 (x = t/q0) ─CtS L→L−3→ S_em
//!   ─conjugate, split→ Re, Im ─EvalMod→ PostBTS (+ spare), S_x = Δ_post·q0/Δ0
//!   ─recombine, relabel→ PostBTS, Δ_post (the default scale, exactly)
//! ```
//!
//! SlotToCoeff's diagonal scales `d_l = q_l·(Δ0/Δ_in)^{1/3}` (the last one
//! computed exactly) make the level-0 scale `Δ0`; CoeffToSlot's
//! `d_l = q_l·(S_em/q0)^{1/3}` make its output scale `S_em`, the prime of
//! the first EvalMod level. CoeffToSlot also folds `1/(2K)` (and, for
//! sparse slots, the subsum's `2n/N`).

mod choice;
mod failure;

use std::collections::BTreeSet;

use hemem_ckks::params::{Level, Parameters};

pub use self::choice::{
    SSE_HAMMING_WEIGHT, ScheduleChoice, arcsine_fit, notes_choice, preset_of, recommended_choice,
    without_sse_choice,
};
pub use self::failure::irwin_hall_tail_log2;
use crate::dft::{DftKind, HomomorphicDft, rotation_keys};
use crate::{Error, Result};

/// Levels of each homomorphic DFT (BOOTSTRAP-NOTES §2).
pub const DFT_LEVELS: usize = 3;

/// The lowest level a bootstrap input may have: SlotToCoeff uses 3 → 0.
pub const INPUT_LEVEL: usize = 3;

/// The levels and scales of one bootstrap.
#[derive(Clone, Debug, PartialEq)]
pub struct BootstrapSchedule {
    /// The parameters' name.
    pub name: String,
    /// `log2` of the slot count.
    pub log_slots: u32,
    /// The choice it implements.
    pub choice: ScheduleChoice,
    /// The Hamming weight ModRaise sees (the key's, or 32 under SSE).
    pub mod_raise_hamming_weight: usize,
    /// SlotToCoeff radices (`log2`, application order).
    pub stc_log_radices: Vec<u32>,
    /// CoeffToSlot radices (`log2`, application order).
    pub cts_log_radices: Vec<u32>,
    /// The target level-0 scale `Δ0 = q0·2^−ρ`.
    pub delta0: f64,
    /// The top level `L` (ModRaise's target).
    pub top_level: usize,
    /// CoeffToSlot's diagonal scales (levels `L, L−1, L−2`).
    pub cts_diagonal_scales: Vec<f64>,
    /// The CoeffToSlot output scale `S_em` (the prime of level `L − 3`).
    pub s_em: f64,
    /// The level EvalMod starts at, `L − 3`.
    pub eval_mod_level: usize,
    /// Levels left between EvalMod's end and PostBTS (dropped).
    pub spare_levels: usize,
    /// The post-bootstrap level.
    pub post_level: usize,
    /// Its default scale `Δ_post`: the output's scale, exactly.
    pub output_scale: f64,
    /// `S_x = Δ_post·2^ρ`, the scale EvalMod lands on.
    pub s_x: f64,
    /// The BSGS ratio (`log2`) of the DFTs.
    pub log_bsgs_ratio: i32,
}

impl BootstrapSchedule {
    /// The schedule of `params` with `choice`, at `slots` slots (`None`:
    /// the parameters' slot count): the lower-level constructor, for a
    /// choice of one's own (another `ρ`, EvalMod or SSE setting, as
    /// [`notes_choice`] and [`without_sse_choice`] give). Programs take
    /// [`BootstrapSchedule::recommended`] or
    /// [`BootstrapSchedule::recommended_for_slots`].
    ///
    /// # Errors
    /// [`Error::NotBootstrappable`] for parameters without a post-bootstrap
    /// level; [`Error::InvalidParameter`] when EvalMod does not fit between
    /// `L − 3` and PostBTS; [`Error::InvalidSlots`].
    pub fn new(params: &Parameters, choice: ScheduleChoice, slots: Option<usize>) -> Result<Self> {
        let not = || Error::NotBootstrappable {
            name: params.name().to_owned(),
        };
        let post_level = params.post_bootstrap_level().ok_or_else(not)?.0;
        let top_level = params.max_level().0;
        let max_slots = params.slots();
        let n = slots.unwrap_or(max_slots);
        if n == 0 || !n.is_power_of_two() || n > max_slots {
            return Err(Error::InvalidSlots {
                slots: n,
                max: max_slots,
            });
        }
        let log_slots = n.trailing_zeros();
        let eval_mod_level = top_level.checked_sub(DFT_LEVELS).ok_or_else(not)?;
        let end =
            eval_mod_level
                .checked_sub(choice.eval_mod.depth())
                .ok_or(Error::InvalidParameter {
                    name: "eval_mod",
                    reason: "deeper than the levels above PostBTS",
                })?;
        let spare_levels = end.checked_sub(post_level).ok_or(Error::InvalidParameter {
            name: "eval_mod",
            reason: "deeper than the levels above PostBTS",
        })?;
        if post_level < INPUT_LEVEL {
            return Err(not());
        }
        let prime = |l: usize| -> Result<f64> { Ok(params.q_modulus(Level(l))?.value() as f64) };
        let q0 = prime(0)?;
        // ρ = log2(q0/Δ0) leaves Δ0 ≥ 1 only below q0's bit length (and a
        // ρ of 2^31 or more negated to a wrong exponent).
        if f64::from(choice.rho) >= q0.log2() {
            return Err(Error::InvalidParameter {
                name: "rho",
                reason: "log2(q0/Δ0) must be below the bit length of q0",
            });
        }
        let delta0 = q0 * 2f64.powi(-(choice.rho as i32));
        let s_em = prime(eval_mod_level)?;
        let ratio = (s_em / q0).powf(1.0 / DFT_LEVELS as f64);
        let mut cts_diagonal_scales = Vec::with_capacity(DFT_LEVELS);
        let mut scale = q0;
        for i in 0..DFT_LEVELS {
            let level = top_level - i;
            let q = prime(level)?;
            let d = if i + 1 == DFT_LEVELS {
                s_em * q / scale
            } else {
                q * ratio
            };
            scale = scale * d / q;
            cts_diagonal_scales.push(d);
        }
        let output_scale = params.default_scale(Level(post_level))?.0;
        let mod_raise_hamming_weight = if choice.sse {
            SSE_HAMMING_WEIGHT
        } else {
            params.hamming_weight()
        };
        Ok(Self {
            name: params.name().to_owned(),
            log_slots,
            choice,
            mod_raise_hamming_weight,
            stc_log_radices: HomomorphicDft::default_log_radices(
                DftKind::SlotToCoeff,
                log_slots,
                DFT_LEVELS,
            ),
            cts_log_radices: HomomorphicDft::default_log_radices(
                DftKind::CoeffToSlot,
                log_slots,
                DFT_LEVELS,
            ),
            delta0,
            top_level,
            cts_diagonal_scales,
            s_em,
            eval_mod_level,
            spare_levels,
            post_level,
            output_scale,
            s_x: output_scale * 2f64.powi(choice.rho as i32),
            log_bsgs_ratio: 0,
        })
    }

    /// The schedule of parameters with a HEaaN preset's structure (the
    /// preset, its test variant, or the same primes at another degree or
    /// under another name: [`preset_of`]) with [`recommended_choice`] at
    /// full slots.
    ///
    /// # Errors
    /// As [`BootstrapSchedule::new`]; [`Error::NotBootstrappable`] for
    /// parameters without a preset's structure.
    pub fn recommended(params: &Parameters) -> Result<Self> {
        Self::recommended_for_slots(params, params.slots())
    }

    /// As [`BootstrapSchedule::recommended`], for ciphertexts of `slots`
    /// slots (a power of two up to the parameters' slot count): sparse-slot
    /// bootstrapping. The levels, scales and EvalMod are the preset's; the
    /// DFTs are the smaller ones of `slots` slots (fewer rotation keys, see
    /// [`BootstrapSchedule::rotation_keys`]), and CoeffToSlot folds the
    /// subsum's `2n/N` (the bootstrapper adds the subsum's rotations).
    ///
    /// # Errors
    /// As [`BootstrapSchedule::recommended`]; [`Error::InvalidSlots`].
    pub fn recommended_for_slots(params: &Parameters, slots: usize) -> Result<Self> {
        let shape = preset_of(params)?;
        Self::new(params, recommended_choice(shape), Some(slots))
    }

    /// `ρ` as an f64.
    pub fn rho(&self) -> f64 {
        f64::from(self.choice.rho)
    }

    /// The slot count, `2^log_slots`; 0 when `log_slots` is too large for
    /// a `usize` (the fields are public: [`BootstrapSchedule::check_for`]
    /// refuses such a schedule before anything uses its slot count).
    pub fn slots(&self) -> usize {
        1usize.checked_shl(self.log_slots).unwrap_or(0)
    }

    /// Checks the fields that size and place this schedule against
    /// `params`, as the bootstrapper, the key request and the simulator do
    /// before they use it: made for parameters of that name, top level and
    /// post-bootstrap level, with a slot count no larger than theirs, and
    /// one DFT radix per DFT level, together factoring it. The EvalMod
    /// circuit and the scales are not checked here: the stages refuse
    /// scales out of range and levels too low as they run.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `schedule` (other parameters),
    /// `log_slots` (more slots than `N/2`) or the radices.
    pub fn check_for(&self, params: &Parameters) -> Result<()> {
        if self.name != params.name()
            || self.top_level != params.max_level().0
            || Some(self.post_level) != params.post_bootstrap_level().map(|l| l.0)
        {
            return Err(Error::InvalidParameter {
                name: "schedule",
                reason: "the schedule was made for other parameters (BootstrapSchedule::recommended_for_slots with this context's)",
            });
        }
        if self.log_slots > params.slots().trailing_zeros() {
            return Err(Error::InvalidParameter {
                name: "log_slots",
                reason: "more slots than the parameters have (N/2)",
            });
        }
        let factors = |radices: &[u32]| {
            radices.len() == DFT_LEVELS
                && radices.iter().map(|&r| u64::from(r)).sum::<u64>() == u64::from(self.log_slots)
        };
        if !factors(&self.stc_log_radices) {
            return Err(Error::InvalidParameter {
                name: "stc_log_radices",
                reason: "one radix per DFT level, whose logarithms add up to log_slots",
            });
        }
        if !factors(&self.cts_log_radices) {
            return Err(Error::InvalidParameter {
                name: "cts_log_radices",
                reason: "one radix per DFT level, whose logarithms add up to log_slots",
            });
        }
        Ok(())
    }

    /// SlotToCoeff's diagonal scales for an input at `input_scale`
    /// (levels 3, 2, 1): `q_l·(Δ0/Δ_in)^{1/3}`, the last one exact so that
    /// the f64 scale after the third rescale is `Δ0`.
    ///
    /// # Errors
    /// Level errors of `params`; [`Error::NonFinite`] for a bad scale.
    pub fn stc_diagonal_scales(&self, params: &Parameters, input_scale: f64) -> Result<Vec<f64>> {
        if !(input_scale.is_finite() && input_scale > 0.0) {
            return Err(Error::NonFinite);
        }
        let ratio = (self.delta0 / input_scale).powf(1.0 / DFT_LEVELS as f64);
        let mut scale = input_scale;
        let mut out = Vec::with_capacity(DFT_LEVELS);
        for i in 0..DFT_LEVELS {
            let level = INPUT_LEVEL - i;
            let q = params.q_modulus(Level(level))?.value() as f64;
            let d = if i + 1 == DFT_LEVELS {
                self.delta0 * q / scale
            } else {
                q * ratio
            };
            scale = scale * d / q;
            out.push(d);
        }
        Ok(out)
    }

    /// The scales after each SlotToCoeff rescale (levels 2, 1, 0) for an
    /// input at `input_scale`.
    ///
    /// # Errors
    /// As [`BootstrapSchedule::stc_diagonal_scales`].
    pub fn stc_scales(&self, params: &Parameters, input_scale: f64) -> Result<Vec<f64>> {
        let d = self.stc_diagonal_scales(params, input_scale)?;
        let mut scale = input_scale;
        d.iter()
            .enumerate()
            .map(|(i, &di)| {
                let q = params.q_modulus(Level(INPUT_LEVEL - i))?.value() as f64;
                scale = scale * di / q;
                Ok(scale)
            })
            .collect()
    }

    /// Whether hemem-ckks's rescale rule ([`Parameters::check_rescale`]:
    /// result ≤ 2·q) accepts every SlotToCoeff rescale for an input at
    /// `input_scale`. It does on FVc only: elsewhere Δ grows towards
    /// `q0·2^−ρ` above the bottom primes, so the bootstrapper needs a
    /// rescale without that rule at levels 3 → 0.
    ///
    /// # Errors
    /// As [`BootstrapSchedule::stc_diagonal_scales`].
    pub fn stc_passes_hemem_rescale_rule(
        &self,
        params: &Parameters,
        input_scale: f64,
    ) -> Result<bool> {
        let d = self.stc_diagonal_scales(params, input_scale)?;
        let mut scale = input_scale;
        for (i, &di) in d.iter().enumerate() {
            let level = Level(INPUT_LEVEL - i);
            if params
                .check_rescale(level, hemem_ckks::params::Scale(scale * di))
                .is_err()
            {
                return Ok(false);
            }
            let q = params.q_modulus(level)?.value() as f64;
            scale = scale * di / q;
        }
        Ok(true)
    }

    /// The SlotToCoeff DFT.
    ///
    /// # Errors
    /// [`Error::InvalidSlots`].
    pub fn stc_dft(&self) -> Result<HomomorphicDft> {
        HomomorphicDft::new(DftKind::SlotToCoeff, self.slots(), &self.stc_log_radices)
    }

    /// The CoeffToSlot DFT with `1/(2K)` folded in (spread evenly). The
    /// homomorphic bootstrapper also folds the subsum's `2n/N` for sparse
    /// slots.
    ///
    /// # Errors
    /// [`Error::InvalidSlots`].
    pub fn cts_dft(&self) -> Result<HomomorphicDft> {
        let mut dft =
            HomomorphicDft::new(DftKind::CoeffToSlot, self.slots(), &self.cts_log_radices)?;
        dft.scale_evenly(1.0 / (2.0 * f64::from(self.choice.eval_mod.k)))?;
        Ok(dft)
    }

    /// The rotation steps both DFTs need (subsum steps for sparse slots
    /// not included).
    ///
    /// # Errors
    /// [`Error::InvalidSlots`].
    pub fn rotation_keys(&self) -> Result<BTreeSet<usize>> {
        let stc = self.stc_dft()?;
        let cts = self.cts_dft()?;
        Ok(rotation_keys(&[&cts, &stc], self.log_bsgs_ratio))
    }

    /// `log2` of the failure probability `N·Pr[|S| > K]` for `S` the sum of
    /// `h+1` uniforms (exact Irwin–Hall, BOOTSTRAP-NOTES §3.1), for the ring
    /// degree of `params`.
    pub fn failure_probability_log2(&self, params: &Parameters) -> f64 {
        let n = params.degree().get() as f64;
        let k = f64::from(self.choice.eval_mod.k);
        n.log2() + irwin_hall_tail_log2(self.mod_raise_hamming_weight + 1, k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hemem_ckks::params::{Preset, SecurityCheck};

    /// A schedule whose public fields were changed is refused by
    /// `check_for` (and so by the bootstrapper and the simulator) with the
    /// field named, instead of overflowing its slot count or allocating
    /// 2^40 slots; the untouched schedule passes.
    #[test]
    fn check_for_refuses_slots_and_radices_that_do_not_fit() {
        let params =
            Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
        let good = BootstrapSchedule::recommended_for_slots(&params, params.slots() / 4).unwrap();
        assert_eq!(good.check_for(&params), Ok(()));
        let full = params.slots().trailing_zeros();
        type Change = fn(&mut BootstrapSchedule, u32);
        let cases: [(&str, Change); 7] = [
            ("log_slots", |s, full| s.log_slots = full + 1),
            ("log_slots", |s, _| s.log_slots = 64),
            ("log_slots", |s, _| s.log_slots = u32::MAX),
            ("stc_log_radices", |s, _| s.stc_log_radices[0] += 1),
            ("cts_log_radices", |s, _| s.cts_log_radices.push(0)),
            ("cts_log_radices", |s, _| {
                s.cts_log_radices = vec![u32::MAX, u32::MAX, 2];
            }),
            ("schedule", |s, _| s.top_level += 1),
        ];
        for (field, change) in cases {
            let mut s = good.clone();
            change(&mut s, full);
            match s.check_for(&params) {
                Err(Error::InvalidParameter { name, .. }) => assert_eq!(name, field),
                other => panic!("{field}: {other:?}"),
            }
            // Keys are neither sized nor requested for it.
            match crate::BootstrapKeys::planned_bytes(&s, &params) {
                Err(Error::InvalidParameter { name, .. }) => assert_eq!(name, field),
                other => panic!("{field}: planned bytes {other:?}"),
            }
        }
        // A ρ that leaves no Δ0 ≥ 1 (2^31 negated to a wrong exponent).
        for rho in [60, 1 << 31, u32::MAX] {
            let choice = ScheduleChoice { rho, ..good.choice };
            assert!(matches!(
                BootstrapSchedule::new(&params, choice, None),
                Err(Error::InvalidParameter { name: "rho", .. })
            ));
        }
        // A radix list that would underflow the key request's levels.
        let mut deep = good.clone();
        deep.stc_log_radices = vec![0, 0, 0, 0, good.log_slots];
        assert!(matches!(
            crate::bootstrapper::key_request(&deep, &params),
            Err(Error::InvalidParameter {
                name: "stc_log_radices",
                ..
            })
        ));
        let mut huge = good.clone();
        huge.log_slots = 64;
        assert_eq!(huge.slots(), 0);
        let simulated = crate::simulate::simulate(
            &params,
            &huge,
            &crate::simulate::SimulationOptions::default(),
        );
        assert!(matches!(
            simulated,
            Err(Error::InvalidParameter {
                name: "log_slots",
                ..
            })
        ));
    }

    /// Every choice, not only the recommended one (hence
    /// [`BootstrapSchedule::new`] rather than `recommended`).
    #[test]
    fn every_preset_lands_on_post_bts() {
        for preset in Preset::HEAAN {
            let params = Parameters::from_preset(preset).unwrap();
            for choice in [notes_choice(preset), recommended_choice(preset)]
                .into_iter()
                .chain(without_sse_choice(preset))
            {
                let s = BootstrapSchedule::new(&params, choice, None).unwrap();
                assert_eq!(
                    s.eval_mod_level - choice.eval_mod.depth() - s.spare_levels,
                    params.post_bootstrap_level().unwrap().0,
                    "{preset}"
                );
                // HEaaN's 38/42/34 keys take each giant step directly;
                // Horner's giant steps need 23/27/19.
                let keys = s.rotation_keys().unwrap().len();
                let horner = match params.bootstrap_rotation_keys() {
                    Some(38) => 23,
                    Some(42) => 27,
                    Some(34) => 19,
                    other => panic!("{preset}: {other:?}"),
                };
                assert_eq!(keys, horner, "{preset}");
                let stc = s.stc_scales(&params, 2f64.powi(40)).unwrap();
                assert!((stc[2] / s.delta0 - 1.0).abs() < 1e-15);
            }
        }
        // Spares: FVc keeps one level (E needs 12 of 13).
        let fvc = Parameters::from_preset(Preset::FVc).unwrap();
        let s = BootstrapSchedule::recommended(&fvc).unwrap();
        assert_eq!(s.spare_levels, 1);
        let test =
            Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap();
        let s = BootstrapSchedule::recommended(&test).unwrap();
        assert_eq!(s.post_level, 12);
        assert_eq!(s.log_slots, 11);
    }

    #[test]
    fn recommended_for_every_slot_count() {
        for preset in Preset::TEST {
            let params =
                Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
            let full = BootstrapSchedule::recommended(&params).unwrap();
            assert_eq!(full.slots(), params.slots());
            assert_eq!(preset_of(&params).unwrap(), preset.shape_of());
            let mut previous_keys = full.rotation_keys().unwrap().len();
            for log_slots in (0..params.log_slots()).rev() {
                let slots = 1usize << log_slots;
                let s = BootstrapSchedule::recommended_for_slots(&params, slots).unwrap();
                assert_eq!(s.slots(), slots, "{preset}");
                assert_eq!(s.choice, full.choice, "{preset}");
                // Levels and scales do not depend on the slot count.
                assert_eq!(
                    (s.post_level, s.output_scale, s.delta0, s.s_em),
                    (full.post_level, full.output_scale, full.delta0, full.s_em),
                    "{preset}"
                );
                assert_eq!(s.cts_diagonal_scales, full.cts_diagonal_scales);
                // Smaller DFTs need no more rotation keys.
                let keys = s.rotation_keys().unwrap();
                assert!(keys.len() <= previous_keys, "{preset} {slots}");
                assert!(keys.iter().all(|&k| k < slots), "{preset} {slots}");
                previous_keys = keys.len();
            }
            for slots in [0, 3, 24, 2 * params.slots()] {
                assert!(
                    matches!(
                        BootstrapSchedule::recommended_for_slots(&params, slots),
                        Err(Error::InvalidSlots { .. })
                    ),
                    "{preset} {slots}"
                );
            }
        }
    }

    #[test]
    fn hemem_rescale_rule_refuses_slot_to_coeff() {
        for preset in Preset::HEAAN {
            let params = Parameters::from_preset(preset).unwrap();
            let s = BootstrapSchedule::recommended(&params).unwrap();
            let enc = params.default_scale(params.enc_level()).unwrap().0;
            let passes = s.stc_passes_hemem_rescale_rule(&params, enc).unwrap();
            // Only FVc keeps Δ at its 54-bit primes all the way down.
            assert_eq!(passes, preset == Preset::FVc, "{preset}");
        }
    }
}
