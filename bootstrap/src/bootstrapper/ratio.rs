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
//! session"), FGb bootstraps 4–6 % faster and FTb 10–11 %; ratio 3 takes
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
//! each extra key is bytes moved in every bootstrap. The extra keys save
//! more time per byte than anything [`DiagonalStorage::Fit`] keeps in full
//! (about 5 ms per GB on the CPU against 3.1 for the first factor's encoded
//! diagonals), so they are weighed first.
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
/// (module documentation).
pub const FAST_LOG_BSGS_RATIO: i32 = 2;

impl Bootstrapper {
    /// `schedule` with the DFTs' BSGS ratio `context`'s memory holds the
    /// keys for: [`FAST_LOG_BSGS_RATIO`] where its rotations differ from
    /// `schedule`'s and the room holds the larger key set without
    /// streaming it (see the [module documentation](self)), else
    /// `schedule` unchanged; also unchanged when `schedule` already has a
    /// ratio at least as large. Call it before generating the keys, with
    /// the context the bootstrapper will run in:
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
        let needed = resident_bytes(context, &fast)?;
        Ok(if holds(spare_room(context, 0), needed) {
            fast
        } else {
            schedule
        })
    }
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

    /// The ratio gains only where it changes the keys: FGb's and FTb's
    /// rotations differ at 2, the FV presets' do not (the module's figures).
    #[test]
    fn the_fast_ratio_changes_the_rotations_of_fg_and_ft_only() -> Result<()> {
        for (preset, differs) in [
            (Preset::FGb, true),
            (Preset::FTb, true),
            (Preset::FVb, false),
        ] {
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
}
