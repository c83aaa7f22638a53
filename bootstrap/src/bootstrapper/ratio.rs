//! The DFTs' BSGS ratio a context's memory holds the keys for
//! ([`Bootstrapper::fit_schedule`]).
//!
//! A BSGS linear transform of `D` diagonals takes `n1` baby-step rotations
//! and about `D / n1` giant steps. Lattigo's rule
//! ([`find_best_bsgs_ratio`](crate::linear_transform::find_best_bsgs_ratio))
//! lets baby steps outnumber giant ones by at most `2^log_bsgs_ratio`. The
//! recommended schedules take 0, which needs the fewest rotation keys (23
//! for FGb, with the giant steps by Horner's rule). A baby step costs one
//! inner product with its key on the hoisted decomposition; a giant step a
//! decomposition of its own (an inverse NTT of the input and a forward NTT
//! of every digit's extension) and a ModDown. A larger ratio trades
//! rotation keys for giant steps: at ratio 2, CoeffToSlot runs 6 % fewer
//! limb NTTs on FGb and 21 % fewer on FTb (`hoisting_counts`, the
//! simulator's cost model) for 4 and 8 more rotation keys (0.31 GB and
//! 0.51 GB seeded); at ratio 3, 13 % and 30 % fewer for 20 and 16 more
//! (+1.51 GB, +1.01 GB), with 8 more rotations a DFT on FGb. Measured
//! (docs/BENCHMARKS.md, "Twenty-second session"), on the H100 ratio 2
//! takes FGb from 32.7 to 31.1 ms and ratio 3 to 30.1 (FGa 36.5 → 34.8 →
//! 33.6, FTb 16.9 → 14.8 → 14.7, FTa 16.9 → 15.3 → 14.9; ratio 4: FGb 47.2);
//! on the CPU ratio 2 takes 3–6 % off FGb and 10–12 % off FTb, and ratio 3
//! is slower than 2 (an inner product weighs more there against an NTT).
//! On the FV presets ratio 2 splits every factor as 0 does, and ratio 3
//! measured no faster on the H100 (FVb 78.7 ms against 78.6) for 24 more
//! keys (+2.94 GB).
//!
//! Keys are made for a schedule before any bootstrapper exists, so the
//! ratio is chosen with the schedule, up a ladder — [`FAST_LOG_BSGS_RATIO`]
//! (2), then on a GPU [`GPU_LOG_BSGS_RATIO`] (3) — taking each step that
//! changes the rotations of the one below (so the FV presets stay at 0;
//! FGa stops at 2 on a GPU, its precision target failing at 3)
//! where the context's room (its budget less what the device holds, or on a CPU half
//! the available host memory: `footprint`) holds its whole key set seeded,
//! the compact diagonals and one bootstrap's working memory — that is,
//! where the extra keys never need to stream — else the schedule as given.
//! A budget that streams keys (2 GiB for FGb) keeps the fewest keys: there
//! each extra key is bytes moved in every bootstrap. The ratio is weighed
//! before anything [`DiagonalStorage::Fit`] keeps in full: only the room
//! left beside the keys can be spent on that.
//!
//! [`DiagonalStorage::Fit`]: crate::linear_transform::DiagonalStorage::Fit

use hemem_ckks::Context;
use hemem_ckks::backend::Device;

use super::footprint::{spare_room, top_ciphertext_bytes, totals};
use super::{
    BootstrapKeys, BootstrapOptions, Bootstrapper, STC_CACHE_CAPACITY, working_ciphertexts,
};
use crate::Result;
use crate::hoisting::Hoisting;
use hemem_ckks::params::Preset;

use crate::schedule::{BootstrapSchedule, INPUT_LEVEL, preset_of};

/// The BSGS ratio (`log2`) [`Bootstrapper::fit_schedule`] takes where the
/// memory holds its keys: the fastest of 0–3 on the CPU for FGb and FTb
/// (docs/BENCHMARKS.md, "Twenty-second session").
pub const FAST_LOG_BSGS_RATIO: i32 = 2;

/// The ratio [`Bootstrapper::fit_schedule`] takes on a GPU above
/// [`FAST_LOG_BSGS_RATIO`], where that one changed the rotations and the
/// memory holds the larger keys: the fastest of 0–3 on the H100 for FGb,
/// FGa, FTa and FTb (FGb 30.1 ms against 31.1 at 2; 47.2 at 4). FGa stops
/// at 2: its seeded real-preset test fell under its precision target at 3.
pub const GPU_LOG_BSGS_RATIO: i32 = 3;

/// The largest BSGS ratio (`log2`) worth making keys for: at 4 the rotation
/// keys outnumber what they save (FGb: 64 keys, more rotations than at 0).
/// [`BootstrapKeys::slot_counts`] recognises keys of every ratio up to it.
pub const MAX_LOG_BSGS_RATIO: i32 = 4;

impl Bootstrapper {
    /// `schedule` with the DFTs' BSGS ratio `context`'s memory holds the
    /// keys for: up the ladder [`FAST_LOG_BSGS_RATIO`], then on a GPU
    /// [`GPU_LOG_BSGS_RATIO`], each step taken where its rotations differ
    /// from those of the step below and the room (the budget less what the
    /// device holds now, or on a CPU half the available host memory) holds
    /// its key set seeded, the compact diagonals and one bootstrap's
    /// working memory ([`working_ciphertexts`]) — where the extra keys
    /// never stream; steps at or below `schedule`'s own ratio are skipped,
    /// and `schedule` is returned unchanged where no step is taken. A larger ratio takes more baby-step
    /// rotation keys and fewer giant steps, each of which costs a
    /// decomposition and a ModDown: on the H100, FGb bootstraps in 31.1 ms
    /// at 2 and 30.1 at 3 against 32.7 at 0, for 4 and 20 more keys
    /// (+0.31 GB, +1.51 GB seeded); the FV presets split alike at 0 and 2
    /// and stay at 0. Call it before generating the keys, with the context
    /// the bootstrapper will run in (keys carry the ratio of the memory
    /// they were made for):
    ///
    /// ```no_run
    /// # use hemem_bootstrap::{BootstrapKeys, Bootstrapper, schedule::BootstrapSchedule};
    /// # use hemem_ckks::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let params = Parameters::from_preset(Preset::FGb)?;
    /// let context = Context::new(params.clone(), DeviceSelection::Gpu(0))?;
    /// let keygen = KeyGenerator::new(&context)?;
    /// let secret = keygen.secret_key()?;
    /// let schedule = Bootstrapper::fit_schedule(&context, BootstrapSchedule::recommended(&params)?)?;
    /// let keys = BootstrapKeys::generate(&keygen, &secret, &schedule)?;
    /// let bootstrapper = Bootstrapper::new(&context, schedule, keys)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`crate::Error::InvalidParameter`] (through
    /// [`BootstrapSchedule::check_for`]) for a schedule the context's
    /// parameters cannot run.
    pub fn fit_schedule(
        context: &Context,
        schedule: BootstrapSchedule,
    ) -> Result<BootstrapSchedule> {
        Self::fit_schedule_with(context, schedule, &BootstrapOptions::default())
    }

    /// [`Bootstrapper::fit_schedule`] for a bootstrapper that will be made
    /// with `options`: their
    /// [`working_reserve`](BootstrapOptions::working_reserve), where set,
    /// is the working memory each step must leave room for.
    ///
    /// # Errors
    /// As [`Bootstrapper::fit_schedule`].
    pub fn fit_schedule_with(
        context: &Context,
        schedule: BootstrapSchedule,
        options: &BootstrapOptions,
    ) -> Result<BootstrapSchedule> {
        let params = context.params();
        schedule.check_for(params)?;
        let ladder = match context.device() {
            Device::Gpu(_) => gpu_ladder(params),
            Device::Cpu => &[FAST_LOG_BSGS_RATIO],
        };
        let room = Room {
            bytes: spare_room(context, 0),
            working_reserve: options.working_reserve,
        };
        fit_in(&room, context, schedule, ladder)
    }
}

/// The room a ladder's steps must fit: its bytes (`None`: unknown) and the
/// working memory to leave in it, in top-level ciphertexts (`None`:
/// [`working_ciphertexts`]).
struct Room {
    bytes: Option<u64>,
    working_reserve: Option<u64>,
}

/// The ratios a GPU context climbs: up to [`GPU_LOG_BSGS_RATIO`], but for
/// FGa, whose real bootstrap measured 27.91 bits at ratio 3 against its
/// 28-bit target (28.34 at ratio 2; H100, 2026-12-05): the rounding of
/// another split moves its error, and FGa has the least margin of the
/// presets.
fn gpu_ladder(params: &hemem_ckks::params::Parameters) -> &'static [i32] {
    match preset_of(params) {
        Ok(Preset::FGa) => &[FAST_LOG_BSGS_RATIO],
        _ => &[FAST_LOG_BSGS_RATIO, GPU_LOG_BSGS_RATIO],
    }
}

/// `schedule` taken up the steps of `ladder` (ratios, rising) above its
/// own ratio while each step changes the rotations of the one below and
/// `room` holds what a bootstrapper of it keeps resident in `context`
/// ([`resident_bytes`]).
fn fit_in(
    room: &Room,
    context: &Context,
    schedule: BootstrapSchedule,
    ladder: &[i32],
) -> Result<BootstrapSchedule> {
    let start = schedule.log_bsgs_ratio;
    let mut fitted = schedule;
    for &log_bsgs_ratio in ladder.iter().filter(|&&r| r > start) {
        let step = BootstrapSchedule {
            log_bsgs_ratio,
            ..fitted.clone()
        };
        if step.rotation_keys()? == fitted.rotation_keys()?
            || !holds(
                room.bytes,
                resident_bytes(context, &step, room.working_reserve)?,
            )
        {
            break;
        }
        fitted = step;
    }
    Ok(fitted)
}

/// What a bootstrapper of `schedule` holds with nothing kept in full and
/// nothing streamed: the key set seeded, the compact diagonals (SlotToCoeff's
/// for every cached input scale) and the working memory `fit` reserves
/// (`working_reserve` top-level ciphertexts, or [`working_ciphertexts`]).
fn resident_bytes(
    context: &Context,
    schedule: &BootstrapSchedule,
    working_reserve: Option<u64>,
) -> Result<u64> {
    let params = context.params();
    let limb_bytes = 8 * params.degree().get() as u64;
    let special = params.p_moduli().len();
    let ratio = schedule.log_bsgs_ratio;
    let (cts, _) = totals(&schedule.cts_dft()?.encoded_sizes(
        schedule.top_level,
        ratio,
        Hoisting::Single,
        limb_bytes,
        special,
    ));
    let (stc, _) = totals(&schedule.stc_dft()?.encoded_sizes(
        INPUT_LEVEL,
        ratio,
        Hoisting::Single,
        limb_bytes,
        special,
    ));
    let working = working_reserve
        .unwrap_or_else(|| working_ciphertexts(context))
        .saturating_mul(top_ciphertext_bytes(context, schedule));
    Ok(BootstrapKeys::planned_bytes(schedule, params)?
        .saturating_add(cts)
        .saturating_add((STC_CACHE_CAPACITY as u64).saturating_mul(stc))
        .saturating_add(working))
}

/// Whether a `room` (`None`: unknown) holds `needed` bytes. An unknown room
/// (a CPU whose available memory cannot be read) holds nothing extra.
fn holds(room: Option<u64>, needed: u64) -> bool {
    room.is_some_and(|room| needed <= room)
}

#[cfg(test)]
mod tests {
    use hemem_ckks::params::{Parameters, SecurityCheck};

    use super::*;

    /// A CPU context of `preset` and its recommended schedule.
    fn cpu(preset: Preset) -> Result<(Parameters, Context, BootstrapSchedule)> {
        let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure)?;
        let context = Context::new(params.clone(), hemem_ckks::backend::DeviceSelection::Cpu)?;
        let schedule = BootstrapSchedule::recommended(&params)?;
        Ok((params, context, schedule))
    }

    /// A room of `bytes` with the default working reserve.
    fn room(bytes: Option<u64>) -> Room {
        Room {
            bytes,
            working_reserve: None,
        }
    }

    #[test]
    fn an_unknown_or_short_room_holds_nothing() {
        assert!(holds(Some(10), 10));
        assert!(holds(Some(u64::MAX), 11));
        assert!(!holds(Some(9), 10));
        assert!(!holds(None, 1));
        assert!(!holds(None, 0));
    }

    /// The ratio gains only where it changes the keys: the FG and FT
    /// presets' rotations differ at 2, the FV presets' do not (the figures
    /// of `fit_schedule`'s documentation).
    #[test]
    fn the_fast_ratio_changes_the_rotations_of_fg_and_ft_only() -> Result<()> {
        let presets = [
            (Preset::FGa, true),
            (Preset::FGb, true),
            (Preset::FTa, true),
            (Preset::FTb, true),
            (Preset::FVa, false),
            (Preset::FVb, false),
            (Preset::FVc, false),
        ];
        for (preset, differs) in presets {
            let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure)?;
            let schedule = BootstrapSchedule::recommended(&params)?;
            let fast = BootstrapSchedule {
                log_bsgs_ratio: FAST_LOG_BSGS_RATIO,
                ..schedule.clone()
            };
            assert_eq!(
                fast.rotation_keys()? != schedule.rotation_keys()?,
                differs,
                "{preset}"
            );
            if differs {
                assert!(
                    BootstrapKeys::planned_bytes(&fast, &params)?
                        > BootstrapKeys::planned_bytes(&schedule, &params)?
                );
            }
        }
        Ok(())
    }

    /// The room decides each step: the top of the ladder where the room
    /// holds its keys, compact diagonals and working memory, the step below
    /// a byte short of that, the given schedule a byte short of the first
    /// step or where the room is unknown.
    #[test]
    fn each_step_needs_room_for_its_resident_bytes() -> Result<()> {
        let (params, context, schedule) = cpu(Preset::TestFGb)?;
        let at = |log_bsgs_ratio| BootstrapSchedule {
            log_bsgs_ratio,
            ..schedule.clone()
        };
        let ladder = [FAST_LOG_BSGS_RATIO, GPU_LOG_BSGS_RATIO];
        let (two, three) = (
            resident_bytes(&context, &at(FAST_LOG_BSGS_RATIO), None)?,
            resident_bytes(&context, &at(GPU_LOG_BSGS_RATIO), None)?,
        );
        // More than the keys alone: the diagonals and working memory too.
        assert!(two > BootstrapKeys::planned_bytes(&at(FAST_LOG_BSGS_RATIO), &params)?);
        assert!(three > two, "ratio 3 holds more keys");
        let ratio = |bytes: Option<u64>| -> Result<i32> {
            let room = room(bytes);
            Ok(fit_in(&room, &context, schedule.clone(), &ladder)?.log_bsgs_ratio)
        };
        let ratio_from = |start| -> Result<i32> {
            let room = room(Some(u64::MAX));
            Ok(fit_in(&room, &context, at(start), &ladder)?.log_bsgs_ratio)
        };
        assert_eq!(ratio_from(FAST_LOG_BSGS_RATIO)?, GPU_LOG_BSGS_RATIO);
        assert_eq!(ratio_from(4)?, 4, "a larger ratio is kept");
        assert_eq!(ratio(Some(u64::MAX))?, GPU_LOG_BSGS_RATIO);
        assert_eq!(ratio(Some(three))?, GPU_LOG_BSGS_RATIO);
        assert_eq!(ratio(Some(three - 1))?, FAST_LOG_BSGS_RATIO);
        assert_eq!(ratio(Some(two))?, FAST_LOG_BSGS_RATIO);
        assert_eq!(ratio(Some(two - 1))?, 0);
        assert_eq!(ratio(Some(0))?, 0);
        assert_eq!(ratio(None)?, 0);
        // A CPU context (whose room, half the available host memory, holds
        // a test preset's keys) climbs to 2 and no further, and a schedule
        // at 2 is not climbed again.
        let cpu = Bootstrapper::fit_schedule(&context, schedule.clone())?;
        assert_eq!(cpu.log_bsgs_ratio, FAST_LOG_BSGS_RATIO);
        assert_eq!(
            Bootstrapper::fit_schedule(&context, cpu)?.log_bsgs_ratio,
            FAST_LOG_BSGS_RATIO
        );
        // Ratio 1 splits as 0 here: a schedule at 1 climbs like one at 0.
        assert_eq!(ratio_from(1)?, GPU_LOG_BSGS_RATIO);
        // A working reserve past any memory (the options') leaves no room.
        let reserved = BootstrapOptions {
            working_reserve: Some(u64::MAX),
            ..BootstrapOptions::default()
        };
        let kept = Bootstrapper::fit_schedule_with(&context, schedule.clone(), &reserved)?;
        assert_eq!(kept.log_bsgs_ratio, 0);
        Ok(())
    }

    /// FGa's GPU ladder stops at 2 (its precision); the other FG and FT
    /// presets climb to 3, at their real and test structures alike.
    #[test]
    fn fga_stops_at_ratio_two_on_a_gpu() -> Result<()> {
        for (preset, top) in [
            (Preset::FGa, FAST_LOG_BSGS_RATIO),
            (Preset::TestFGa, FAST_LOG_BSGS_RATIO),
            (Preset::FGb, GPU_LOG_BSGS_RATIO),
            (Preset::TestFGb, GPU_LOG_BSGS_RATIO),
            (Preset::FTa, GPU_LOG_BSGS_RATIO),
            (Preset::FTb, GPU_LOG_BSGS_RATIO),
        ] {
            let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure)?;
            assert_eq!(gpu_ladder(&params).last(), Some(&top), "{preset}");
        }
        Ok(())
    }

    /// A ladder stops at the first step that changes nothing: the FV
    /// presets, whose ratio 2 splits as 0 does, stay at 0 even where
    /// ratio 3 (which would change them) fits.
    #[test]
    fn the_fv_presets_stay_at_ratio_zero() -> Result<()> {
        let (_, context, schedule) = cpu(Preset::FVb)?;
        let fitted = fit_in(
            &room(Some(u64::MAX)),
            &context,
            schedule,
            &[FAST_LOG_BSGS_RATIO, GPU_LOG_BSGS_RATIO],
        )?;
        assert_eq!(fitted.log_bsgs_ratio, 0);
        Ok(())
    }
}
