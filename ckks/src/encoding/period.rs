//! Messages whose slots repeat: a message of `p` slots, as CKKS packs it
//! (a polynomial in `X^{N/2p}`), is also the message of `n` slots (`p | n`)
//! that repeats it `n/p` times, because the canonical embedding's slots of
//! a polynomial in `X^{N/2p}` are periodic with period `p` (the slot `j` is
//! the evaluation at `ζ^{5^j}`, and `5` has order `p` modulo `4p`). Encoding
//! only one period keeps the same message in `2p` coefficients instead of
//! `2n` ([`crate::encoding::CompactPlaintext`]) and makes its NTT form `2p`
//! values repeated ([`crate::ntt::forward_subring`]).
//!
//! Bootstrapping's DFT diagonals are such messages: a factor of radix `2^r`
//! made of the stages `I ⊗ B_{2^s}` has diagonals of period `2^s` for its
//! largest `s`, so at FGb two of CoeffToSlot's three factors repeat with
//! periods 1024 and 32.

use num_complex::Complex64;

use super::{CompactPlaintext, Plaintext};
use crate::context::Context;
use crate::{OperandError, Result};

/// The least power-of-two period of `values` (exact equality, so the
/// result is the same on every machine): `p` with `values[j] ==
/// values[j mod p]` for every `j`; `values.len()` when nothing shorter
/// repeats, 0 for no values. The length should be a power of two (a slot
/// count); for another length, only periods dividing it are tried.
pub fn least_period(values: &[Complex64]) -> usize {
    let n = values.len();
    let mut p = 1;
    while p < n {
        if n.is_multiple_of(p)
            && values
                .chunks_exact(p)
                .skip(1)
                .all(|chunk| values.get(..p) == Some(chunk))
        {
            return p;
        }
        p *= 2;
    }
    n
}

/// Whether a message of `period` slots, in a ring of degree `n`, is short
/// enough to be kept periodic ([`super::Plaintext::is_periodic`]): its
/// `2·period` distinct values a limb are fewer than `n` and at most
/// [`crate::backend::MAX_PERIODIC_POINTS`] (what one GPU block transforms).
pub fn is_short_period(n: usize, period: usize) -> bool {
    let points = 2 * period;
    points < n && points <= crate::backend::MAX_PERIODIC_POINTS
}

/// Checks that a message of `period` slots can be read as one of `slots`
/// slots: both powers of two, `period ≤ slots ≤ N/2`.
fn check_repeat(context: &Context, period: usize, slots: usize) -> Result<()> {
    context.check_slots(slots)?;
    if slots < period {
        let max = context.params().degree().get() / 2;
        return Err(OperandError::InvalidSlots { slots, max }.into());
    }
    Ok(())
}

impl Plaintext {
    /// The same plaintext read as the message of `slots` slots that
    /// repeats its own `self.slots()` slots: the polynomial is unchanged.
    /// A message of `p` slots, as CKKS packs it (a polynomial in
    /// `X^{N/2p}`), decodes at `slots` slots to that repetition
    /// ([`least_period`] finds the shortest period of a vector).
    ///
    /// # Errors
    /// [`OperandError::InvalidSlots`] unless `slots` is a power of two from
    /// `self.slots()` to N/2.
    pub fn repeat_slots(mut self, slots: usize) -> Result<Self> {
        check_repeat(&self.context, self.slots, slots)?;
        self.slots = slots;
        Ok(self)
    }
}

impl CompactPlaintext {
    /// As [`Plaintext::repeat_slots`]: the words (one period's `2·p`
    /// coefficients, [`CompactPlaintext::period`]) are unchanged, and so is
    /// what they expand to.
    ///
    /// # Errors
    /// As [`Plaintext::repeat_slots`].
    pub fn repeat_slots(mut self, slots: usize) -> Result<Self> {
        check_repeat(&self.context, self.period, slots)?;
        self.slots = slots;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    fn c(re: f64) -> Complex64 {
        Complex64::new(re, -re / 3.0)
    }

    #[test]
    fn the_least_period_is_found_and_one_difference_breaks_it() {
        let base: Vec<Complex64> = (0..8).map(|i| c(f64::from(i) + 0.5)).collect();
        let repeated: Vec<Complex64> = base.iter().cycle().take(64).copied().collect();
        assert_eq!(least_period(&repeated), 8);
        let mut broken = repeated.clone();
        broken[40] = c(1e-300);
        assert_eq!(least_period(&broken), 64);
        // A tiny difference counts: the period is exact.
        let mut nudged = repeated;
        nudged[63].im = f64::from_bits(nudged[63].im.to_bits() + 1);
        assert_eq!(least_period(&nudged), 64);
        assert_eq!(least_period(&vec![c(2.0); 16]), 1);
        assert_eq!(least_period(&[]), 0);
        assert_eq!(least_period(&[c(1.0)]), 1);
    }
}
