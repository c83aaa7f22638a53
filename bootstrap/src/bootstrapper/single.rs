//! One bootstrap, stage by stage, with each intermediate ciphertext
//! offered to an observer ([`Stage`]).

use hemem_ckks::eval::Ciphertext;

use super::Bootstrapper;
use crate::ckks_ops::CkksOps;
use crate::coeff_to_slot::coeff_to_slot;
use crate::schedule::INPUT_LEVEL;
use crate::slot_to_coeff::slot_to_coeff;
use crate::{Error, Result};

/// The intermediate ciphertexts of one bootstrap, in order, as
/// [`Bootstrapper::bootstrap_observed`] hands them out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stage {
    /// After SlotToCoeff: level 0, scale `Δ0`, slots holding what is now
    /// the coefficient encoding.
    SlotToCoeff,
    /// After ModRaise (and SSE's switch back): the top level, read at scale
    /// `q0`; slots hold the coefficients plus `q0·I` multiples.
    ModRaise,
    /// After SubSum (sparse slots only).
    SubSum,
    /// After CoeffToSlot: level `L − 3`, scale `S_em`.
    CoeffToSlot,
    /// The real part `(a/K)` split off for EvalMod.
    RealPart,
    /// The imaginary part `(b/K)` (complex bootstraps only).
    ImaginaryPart,
}

impl Bootstrapper {
    pub(super) fn check_input(&self, input: &Ciphertext) -> Result<()> {
        self.context
            .check_same(input.context())
            .map_err(Error::from)?;
        if input.slots() != self.schedule.slots() {
            return Err(Error::SlotMismatch {
                left: input.slots(),
                right: self.schedule.slots(),
            });
        }
        if input.level().get() < INPUT_LEVEL {
            return Err(Error::LevelTooLow {
                operation: "bootstrap",
                needed: INPUT_LEVEL,
                level: input.level().get(),
            });
        }
        Ok(())
    }

    /// Bootstraps a ciphertext of complex slot values.
    ///
    /// # Errors
    /// [`Error::LevelTooLow`] below level 3; [`Error::SlotMismatch`];
    /// context, device and key errors.
    pub fn bootstrap(&self, input: &Ciphertext) -> Result<Ciphertext> {
        self.run(input, false)
    }

    /// Bootstraps a ciphertext whose slot values are real: one EvalMod
    /// instead of two (the imaginary parts come out as noise and are dropped).
    ///
    /// # Errors
    /// As [`Bootstrapper::bootstrap`].
    pub fn bootstrap_real(&self, input: &Ciphertext) -> Result<Ciphertext> {
        self.run(input, true)
    }

    /// Bootstraps as [`Bootstrapper::bootstrap`] (or, with `real_only`,
    /// [`Bootstrapper::bootstrap_real`]) and hands every intermediate
    /// ciphertext to `observe` as it is made: for error breakdowns (decrypt
    /// each stage and compare it with its plaintext counterpart, as the
    /// `error_breakdown` example does) and for tracing.
    ///
    /// # Errors
    /// As [`Bootstrapper::bootstrap`].
    pub fn bootstrap_observed(
        &self,
        input: &Ciphertext,
        real_only: bool,
        observe: &mut dyn FnMut(Stage, &Ciphertext),
    ) -> Result<Ciphertext> {
        self.run_observed(input, real_only, observe)
    }

    fn run(&self, input: &Ciphertext, real_only: bool) -> Result<Ciphertext> {
        self.run_observed(input, real_only, &mut |_, _| {})
    }

    fn run_observed(
        &self,
        input: &Ciphertext,
        real_only: bool,
        observe: &mut dyn FnMut(Stage, &Ciphertext),
    ) -> Result<Ciphertext> {
        self.check_input(input)?;
        let _phase = self.phase(real_only, &[input.scale().get()]);
        let ops = CkksOps::new(&self.evaluator);

        // SlotToCoeff, levels 3 → 0.
        let stc = self.stc_for(input.scale().get())?;
        let coeffs = slot_to_coeff(&ops, input, &stc)?;
        observe(Stage::SlotToCoeff, &coeffs);
        let delta0 = coeffs.scale().get();

        let mut raised = self.mod_raise_all(vec![coeffs])?;
        let raised = raised.pop().ok_or(Error::InvalidParameter {
            name: "inputs",
            reason: "lost in ModRaise",
        })?;
        observe(Stage::ModRaise, &raised);
        let raised = if self.subsum.is_empty() {
            raised
        } else {
            let mut summed = self.subsum_all(vec![raised])?;
            let summed = summed.pop().ok_or(Error::InvalidParameter {
                name: "inputs",
                reason: "lost in SubSum",
            })?;
            observe(Stage::SubSum, &summed);
            summed
        };

        // CoeffToSlot, the split, EvalMod, recombination.
        let v = coeff_to_slot(&ops, &raised, &self.cts)?;
        observe(Stage::CoeffToSlot, &v);
        self.finish(&ops, &v, delta0, real_only, observe)
    }
}
