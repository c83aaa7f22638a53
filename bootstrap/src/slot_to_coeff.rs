//! SlotToCoeff, the first stage of a SlotToCoeff-first bootstrap
//! (BOOTSTRAP-NOTES §1): the input dropped to level 3 and the homomorphic
//! DFT's three factors applied, 3 → 0. Written against
//! [`ExtendedArithmetic`], so the [`Bootstrapper`](crate::Bootstrapper) runs
//! it on ciphertexts and [`crate::simulate`] on the simulator.

use crate::dft::EncodedDft;
use crate::hoisting::ExtendedArithmetic;
use crate::schedule::INPUT_LEVEL;
use crate::{Error, Result};

/// SlotToCoeff: drops `x` to the DFT's first level and applies it.
///
/// # Errors
/// [`Error::LevelTooLow`] below level 3, and the errors of `ops`.
pub fn slot_to_coeff<A: ExtendedArithmetic>(
    ops: &A,
    x: &A::Value,
    stc: &EncodedDft<A::Plain, A::Compact>,
) -> Result<A::Value> {
    crate::error::only_output(slot_to_coeff_many(ops, &[x], stc, 1)?, "slot to coeff")
}

/// [`slot_to_coeff`] on a batch, factor by factor, `together` inputs at a
/// time sharing each compact diagonal's expansion
/// ([`EncodedDft::evaluate_shared`]).
///
/// # Errors
/// As [`slot_to_coeff`].
pub fn slot_to_coeff_many<A: ExtendedArithmetic>(
    ops: &A,
    xs: &[&A::Value],
    stc: &EncodedDft<A::Plain, A::Compact>,
    together: usize,
) -> Result<Vec<A::Value>> {
    let start = stc.transforms().first().map_or(INPUT_LEVEL, |t| t.level());
    let lowered = xs
        .iter()
        .map(|&x| {
            let level = ops.level(x);
            if level < start {
                return Err(Error::LevelTooLow {
                    operation: "bootstrap",
                    needed: start,
                    level,
                });
            }
            ops.level_down(x, start)
        })
        .collect::<Result<Vec<_>>>()?;
    stc.evaluate_shared(ops, &lowered.iter().collect::<Vec<_>>(), together)
}
