//! Relinearisation: a tensored ciphertext's third part key-switched back
//! onto the secret, alone, after a lazy sum of products, or together with
//! the rescale that follows it.
//!
//! **Relinearisation and rescale in one ModDown.** A key switch ends by
//! dividing its inner product (over `Q_l ∪ P`, holding `P·d2·s²`) by `P`;
//! the rescale after a product then divides by `q_l`. Adding `P·(d0, d1)`
//! to the inner product's `Q` limbs and dividing by `P·q_l` at once does
//! both with one basis conversion and one transform of `l` limbs instead of
//! two of each, and no `l + 1`-limb intermediate ciphertext. The result is
//! `round((P·d + ks(d2)) / (P·q_l))` where the two steps give
//! `round(round(ks(d2)/P + d) / q_l)`: a different rounding of the same
//! value, with one rounding error fewer. The division by `P·q_l` is an
//! ordinary ModDown whose special basis is `{q_l} ∪ P`
//! ([`crate::backend::Backend::mod_down_pair`] with `K + 1` limbs).

use std::sync::Arc;

use super::ciphertext::check_operands;
use super::keyswitch::{apply_key, decompose, inner_product};
use super::{Ciphertext, Evaluator, TensoredCiphertext};
use crate::Result;
use crate::poly::{Ntt, RnsPoly};

impl Evaluator {
    /// Relinearises a tensored ciphertext with the relinearisation key:
    /// `(d0, d1) + KeySwitch(d2)`.
    ///
    /// # Errors
    /// [`crate::KeyError::NoKeys`] or [`crate::KeyError::MissingRelinearizationKey`].
    pub fn relinearize(&self, t: &TensoredCiphertext) -> Result<Ciphertext> {
        self.context.check_same(&t.context)?;
        let key = self.keys()?.relinearization_key()?;
        let params = self.context.params();
        let decomposition = decompose(params, &t.d2, t.level)?;
        // (d0, d1) are added in ModDown's last pass.
        let (k0, k1) = apply_key(
            params,
            &decomposition,
            key,
            None,
            self.output_class,
            [Some(&t.d0), Some(&t.d1)],
            None,
        )?;
        Ciphertext::from_parts(&self.context, k0, k1, t.level, t.scale, t.slots)
    }

    /// `a·b` relinearised, not rescaled: scale `Δ_a·Δ_b`.
    ///
    /// # Errors
    /// As [`Evaluator::tensor`] and [`Evaluator::relinearize`].
    pub fn mult_without_rescale(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        self.relinearize(&self.tensor(a, b)?)
    }

    /// `Σ_i a_i·b_i [+ addend]` relinearised once, not rescaled: the
    /// products' tensors (and the addend, into their first two parts) are
    /// summed before the one key switch, where a [`Evaluator::mult_without_rescale`]
    /// per product switches keys once each — lazy relinearisation, as in the
    /// sums of products of a Paterson–Stockmeyer polynomial evaluation
    /// (Bossuat et al., ePrint 2020/1203 §4.2). Every pair at one level,
    /// every product (and the addend) at one scale; the key-switching noise
    /// is added once.
    ///
    /// # Errors
    /// No pairs; mismatched contexts, devices, levels or slots; products or
    /// addend at different scales; a missing relinearisation key.
    pub fn mult_sum_without_rescale(
        &self,
        pairs: &[(&Ciphertext, &Ciphertext)],
        addend: Option<&Ciphertext>,
    ) -> Result<Ciphertext> {
        let ((a0, b0), rest) = pairs.split_first().ok_or(crate::Error::LengthMismatch {
            expected: 1,
            actual: 0,
        })?;
        let mut sum = self.tensor(a0, b0)?;
        for (a, b) in rest {
            self.add_tensored_assign(&mut sum, &self.tensor(a, b)?)?;
        }
        self.relinearize_with(sum, addend)
    }

    /// `acc += t` for two tensored ciphertexts (three parts each) at one
    /// level, slot count and scale: how a sum of products is accumulated
    /// before its one relinearisation
    /// ([`Evaluator::mult_sum_without_rescale`]), one product at a time so
    /// that each product's factors can be dropped as soon as it is added.
    ///
    /// # Errors
    /// Mismatched contexts, levels, slots or scales.
    pub fn add_tensored_assign(
        &self,
        acc: &mut TensoredCiphertext,
        t: &TensoredCiphertext,
    ) -> Result<()> {
        self.context.check_same(&acc.context)?;
        check_operands(acc.operand(), t.operand())?;
        acc.d0.add_assign(&t.d0)?;
        acc.d1.add_assign(&t.d1)?;
        acc.d2.add_assign(&t.d2)
    }

    /// Relinearises `t + addend` (the addend into the first two parts):
    /// [`Evaluator::relinearize`] with one more term at the tensor's level
    /// and scale.
    ///
    /// # Errors
    /// A mismatched addend; as [`Evaluator::relinearize`].
    pub fn relinearize_with(
        &self,
        mut t: TensoredCiphertext,
        addend: Option<&Ciphertext>,
    ) -> Result<Ciphertext> {
        if let Some(x) = addend {
            x.check_matches(&t.context, t.level, t.scale, t.slots, t.d0.device())?;
            t.d0.add_assign(&x.c0)?;
            t.d1.add_assign(&x.c1)?;
        }
        self.relinearize(&t)
    }

    /// Relinearises `t + addend` and rescales, in one ModDown that divides
    /// by `P·q_l` (see the module documentation): level `l − 1`, scale
    /// `Δ_t / q_l`, under the user rescale rule of [`Evaluator::rescale`].
    /// The tensor's parts are reused in place.
    ///
    /// # Errors
    /// [`crate::OperandError::LevelTooLow`] at level 0;
    /// [`crate::OperandError::ScaleOverflow`] as [`Evaluator::rescale`]; a
    /// mismatched addend; a missing relinearisation key.
    pub fn relinearize_rescale_with(
        &self,
        t: TensoredCiphertext,
        addend: Option<&Ciphertext>,
    ) -> Result<Ciphertext> {
        self.relinearize_rescale_to(t, addend, true)
    }

    /// [`Evaluator::relinearize_rescale_with`] without the scale rule, as
    /// [`Evaluator::rescale_unchecked`]: only level 0 is refused.
    /// Bootstrapping's polynomial evaluations use it.
    ///
    /// # Errors
    /// [`crate::OperandError::LevelTooLow`] at level 0; a mismatched addend; a
    /// missing relinearisation key.
    pub fn relinearize_rescale_unchecked_with(
        &self,
        t: TensoredCiphertext,
        addend: Option<&Ciphertext>,
    ) -> Result<Ciphertext> {
        self.relinearize_rescale_to(t, addend, false)
    }

    /// The fused relinearisation and rescale of `t + addend`, under the
    /// user rescale rule when `checked` ([`Evaluator::rescale`]'s) or not
    /// ([`Evaluator::rescale_unchecked`]'s).
    fn relinearize_rescale_to(
        &self,
        t: TensoredCiphertext,
        addend: Option<&Ciphertext>,
        checked: bool,
    ) -> Result<Ciphertext> {
        self.context.check_same(&t.context)?;
        let (lower, scale) = self.rescaled(t.level, t.scale, checked)?;
        let key = self.keys()?.relinearization_key()?;
        let TensoredCiphertext {
            context,
            mut d0,
            mut d1,
            d2,
            level,
            scale: t_scale,
            slots,
        } = t;
        if let Some(x) = addend {
            x.check_matches(&context, level, t_scale, slots, d0.device())?;
            d0.add_assign(&x.c0)?;
            d1.add_assign(&x.c1)?;
        }
        let params = self.context.params();
        let decomposition = decompose(params, &d2, level)?;
        drop(d2);
        let (mut acc0, mut acc1) = inner_product(params, &decomposition, key, None)?;
        drop(decomposition);
        // P·(d0, d1) onto the inner product's Q limbs (zero on its P limbs).
        let p_mod_q = params.p_mod_q(level);
        let backend = Arc::clone(acc0.backend());
        for (acc, d) in [(&mut acc0, &d0), (&mut acc1, &d1)] {
            backend.scalar_mul_add_assign(acc.prefix_mut(level.primes())?, d.limbs()?, &p_mod_q)?;
        }
        drop((d0, d1));
        // Q_l ∪ P is q_0 … q_{l−1}, then q_l next to P: dividing by the
        // last K + 1 limbs' primes divides by P·q_l.
        let kept = params.q_indices(lower)?;
        let mut c0 = RnsPoly::<Ntt>::allocate(&backend, &kept, self.output_class, false)?;
        let mut c1 = RnsPoly::<Ntt>::allocate(&backend, &kept, self.output_class, false)?;
        backend.mod_down_pair(
            [acc0.limbs()?, acc1.limbs()?],
            params.p_moduli().len() + 1,
            [None, None],
            [c0.limbs_mut()?, c1.limbs_mut()?],
        )?;
        Ciphertext::from_parts(&self.context, c0, c1, lower, scale, slots)
    }
}
