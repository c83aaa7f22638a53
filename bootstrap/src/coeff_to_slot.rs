//! CoeffToSlot, the stage after ModRaise (BOOTSTRAP-NOTES §1): the inverse
//! homomorphic DFT on the raised value, `L → L − 3`, its diagonals folding
//! `1/(2K)` (and the sparse subsum's `2n/N`). The split into real and
//! imaginary parts that follows it is in [`crate::eval_mod`].

use crate::Result;
use crate::dft::EncodedDft;
use crate::hoisting::ExtendedArithmetic;

/// CoeffToSlot on a ModRaised value (scale `q0`).
///
/// # Errors
/// The errors of `ops`.
pub fn coeff_to_slot<A: ExtendedArithmetic>(
    ops: &A,
    raised: &A::Value,
    cts: &EncodedDft<A::Plain, A::Compact>,
) -> Result<A::Value> {
    cts.evaluate(ops, raised)
}
