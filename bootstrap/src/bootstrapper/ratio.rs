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
//! 0.51 GB seeded). Measured on the CPU (docs/BENCHMARKS.md, "Twenty-second
//! session"), FGb bootstraps 4–6 % faster and FTb 10–12 %; ratio 3 takes
//! 20 more keys on FGb (+1.5 GB) and gains less than 2 on the CPU. On the
//! FV presets, ratio 2 splits every factor as 0 does.
//!
//! Keys are made for a schedule before any bootstrapper exists, so the
//! ratio is chosen with the schedule: [`FAST_LOG_BSGS_RATIO`] where the
//! context's room (its budget less what the device holds, or on a CPU half
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

use super::footprint::{spare_room, top_ciphertext_bytes, totals};
use super::{BootstrapKeys, Bootstrapper, STC_CACHE_CAPACITY, working_ciphertexts};
use crate::Result;
use crate::hoisting::Hoisting;
use crate::schedule::{BootstrapSchedule, INPUT_LEVEL};

/// The BSGS ratio (`log2`) [`Bootstrapper::fit_schedule`] takes where the
/// memory holds its keys: the fastest of 0–3 on the CPU for FGb and FTb
/// (docs/BENCHMARKS.md, "Twenty-second session").
pub const FAST_LOG_BSGS_RATIO: i32 = 2;

/// The largest BSGS ratio (`log2`) worth making keys for: at 4 the rotation
/// keys outnumber what they save (FGb: 64 keys, more rotations than at 0).
/// [`BootstrapKeys::slot_counts`] recognises keys of every ratio up to it.
pub const MAX_LOG_BSGS_RATIO: i32 = 4;

impl Bootstrapper {
    /// `schedule` with the DFTs' BSGS ratio `context`'s memory holds the
    /// keys for: [`FAST_LOG_BSGS_RATIO`] where its rotations differ from
    /// `schedule`'s and the room (the budget less what the device holds
    /// now, or on a CPU half the available host memory) holds the larger
    /// key set seeded, the compact diagonals and one bootstrap's working
    /// memory ([`working_ciphertexts`]) — where the extra keys never
    /// stream — else `schedule` unchanged; also unchanged when `schedule`
    /// already has a ratio at least as large. A larger ratio takes more
    /// baby-step rotation keys and fewer giant steps, each of which costs a
    /// decomposition and a ModDown: on FGb 4 more keys (+0.31 GB seeded)
    /// for 6 % fewer limb NTTs in CoeffToSlot, on FTb 8 more (+0.51 GB)
    /// for 21 % fewer; the FV presets split alike at 0 and 2. Call it
    /// before generating the keys, with the context the bootstrapper will
    /// run in (keys carry the ratio of the memory they were made for):
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
        let params = context.params();
        schedule.check_for(params)?;
        if schedule.log_bsgs_ratio >= FAST_LOG_BSGS_RATIO {
            return Ok(schedule);
        }
        let fast = BootstrapSchedule {
            log_bsgs_ratio: FAST_LOG_BSGS_RATIO,
            ..schedule.clone()
        };
        if fast.rotation_keys()? == schedule.rotation_keys()? {
            return Ok(schedule);
        }
        fit_in(spare_room(context, 0), context, schedule, fast)
    }
}

/// `fast` where a `room` of that many bytes (`None`: unknown) holds what a
/// bootstrapper of it keeps resident in `context` ([`resident_bytes`]),
/// else `schedule`.
fn fit_in(
    room: Option<u64>,
    context: &Context,
    schedule: BootstrapSchedule,
    fast: BootstrapSchedule,
) -> Result<BootstrapSchedule> {
    let needed = resident_bytes(context, &fast)?;
    Ok(if holds(room, needed) { fast } else { schedule })
}

/// What a bootstrapper of `schedule` holds with nothing kept in full and
/// nothing streamed: the key set seeded, the compact diagonals (SlotToCoeff's
/// for every cached input scale) and the working memory `fit` reserves.
fn resident_bytes(context: &Context, schedule: &BootstrapSchedule) -> Result<u64> {
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
    let working =
        working_ciphertexts(context).saturating_mul(top_ciphertext_bytes(context, schedule));
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
    use hemem_ckks::params::{Parameters, Preset, SecurityCheck};

    use super::*;

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

    /// The room decides: the fast schedule exactly where the room holds
    /// its keys, compact diagonals and working memory, the given one a
    /// byte short of that or where the room is unknown.
    #[test]
    fn the_fast_ratio_needs_room_for_its_resident_bytes() -> Result<()> {
        let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)?;
        let context = Context::new(params.clone(), hemem_ckks::backend::DeviceSelection::Cpu)?;
        let schedule = BootstrapSchedule::recommended(&params)?;
        let fast = BootstrapSchedule {
            log_bsgs_ratio: FAST_LOG_BSGS_RATIO,
            ..schedule.clone()
        };
        let needed = resident_bytes(&context, &fast)?;
        // More than the keys alone: the diagonals and working memory too.
        assert!(needed > BootstrapKeys::planned_bytes(&fast, &params)?);
        let ratio = |room| -> Result<i32> {
            Ok(fit_in(room, &context, schedule.clone(), fast.clone())?.log_bsgs_ratio)
        };
        assert_eq!(ratio(Some(needed))?, FAST_LOG_BSGS_RATIO);
        assert_eq!(ratio(Some(u64::MAX))?, FAST_LOG_BSGS_RATIO);
        assert_eq!(ratio(Some(needed - 1))?, 0);
        assert_eq!(ratio(Some(0))?, 0);
        assert_eq!(ratio(None)?, 0);
        Ok(())
    }
}
