//! Ciphertexts kept in the extended basis `Q_l ∪ P` between key switches:
//! the operations of **double hoisting** in BSGS linear transforms
//! (Bossuat, Mouchet, Troncoso-Pastoriza, Hubaux, "Efficient Bootstrapping
//! for Approximate Homomorphic Encryption with Non-Sparse Keys", Eurocrypt
//! 2021, §3.2 and Algorithm 6; Lattigo's `MultiplyByDiagMatrixBSGS`).
//!
//! A key switch ends with a ModDown: the inner product of the gadget digits
//! with the key lands in `Q_l ∪ P` holding `P` times the wanted result, and
//! dividing by `P` brings it back to `Q_l`. Everything a linear transform
//! does after its baby-step rotations (products by plaintext diagonals,
//! sums, automorphisms) is linear, so it can be done **before** that
//! division, on the `Q_l ∪ P` form: the baby steps then need no ModDown at
//! all, and each inner sum (and the whole transform) is divided by `P`
//! once. An [`ExtendedCiphertext`] is that form: `(c0, c1)` over
//! `Q_l ∪ P` with `c0 + c1·s ≈ P·Δ·m`; [`Evaluator::mod_down_extended`]
//! turns it into an ordinary [`Ciphertext`]. Its rounding noise is added
//! once, after the products, instead of once per baby step before them (so
//! it is not multiplied by the diagonals).
//!
//! The diagonals must then have their residues modulo the special primes
//! too: [`crate::encoding::Encoder::encode_extended_at_class`] and
//! [`crate::encoding::CompactPlaintext::expand_all_extended`] make such
//! plaintexts ([`Plaintext::is_extended`]).

use hemem_memory::MemoryClass;

use super::ciphertext::{Operand, check_operands};
use super::keyswitch::{decompose, inner_product};
use super::{Ciphertext, Evaluator};
use crate::backend::{BinaryOp, Device};
use crate::context::Context;
use crate::encoding::Plaintext;
use crate::params::{Level, Scale};
use crate::poly::{Ntt, RnsPoly};
use crate::{Error, KeyError, Result};

/// A ciphertext over the extended basis `Q_l ∪ P` (NTT form) holding `P`
/// times its message: `c0 + c1·s ≈ P·Δ·m` — the form a key switch has
/// before its ModDown, kept by double hoisting (Bossuat et al., Eurocrypt
/// 2021, Algorithm 6) so that products by diagonals and sums happen before
/// the division by `P`. Made by [`Evaluator::rotate_hoisted_extended`],
/// combined by the `*_extended` operations of [`Evaluator`], and brought
/// back to `Q_l` by [`Evaluator::mod_down_extended`]. Its memory is
/// `Temporary`: it lives inside one linear transform.
#[derive(Debug)]
pub struct ExtendedCiphertext {
    pub(crate) context: Context,
    pub(crate) c0: RnsPoly<Ntt>,
    pub(crate) c1: RnsPoly<Ntt>,
    pub(crate) level: Level,
    pub(crate) scale: Scale,
    pub(crate) slots: usize,
}

impl ExtendedCiphertext {
    /// The level `l` (the `Q` part has primes `q_0 … q_l`).
    pub fn level(&self) -> Level {
        self.level
    }

    /// The exact scale of the message (before the factor `P`).
    pub fn scale(&self) -> Scale {
        self.scale
    }

    /// The slot count.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Where the ciphertext lives.
    pub fn device(&self) -> Device {
        self.c0.device()
    }

    /// The two polynomials over `Q_l ∪ P`.
    pub fn parts(&self) -> (&RnsPoly<Ntt>, &RnsPoly<Ntt>) {
        (&self.c0, &self.c1)
    }

    /// Checks that `other` agrees in context, device, level, slots and
    /// `scale`.
    fn check_matches(
        &self,
        context: &Context,
        level: Level,
        scale: Scale,
        slots: usize,
        device: Device,
    ) -> Result<()> {
        check_operands(
            Operand {
                context: &self.context,
                device: self.device(),
                level: self.level,
                scale: self.scale,
                slots: self.slots,
            },
            Operand {
                context,
                device,
                level,
                scale,
                slots,
            },
        )
    }
}

/// `[P·x | 0]`: `x` (over `Q_l`) times `P` on the `Q` limbs, zero on the
/// `P` limbs, in a new `Temporary` polynomial over `qp`.
fn times_p_extended(x: &RnsPoly<Ntt>, qp: &[usize], p_mod_q: &[u64]) -> Result<RnsPoly<Ntt>> {
    let backend = x.backend();
    let q_count = x.limb_count();
    let mut out = RnsPoly::<Ntt>::allocate(backend, qp, MemoryClass::Temporary, false)?;
    backend.copy(x.limbs()?, out.prefix_mut(q_count)?)?;
    // Multiplying by 0 sets the (unwritten) P limbs to zero, as
    // `RnsPoly::zero` does.
    let mut scalars = p_mod_q.to_vec();
    scalars.resize(qp.len(), 0);
    backend.scalar_assign(BinaryOp::Mul, out.limbs_mut()?, &scalars)?;
    Ok(out)
}

impl Evaluator {
    /// The rotations of `a` by each of `steps`, kept in the extended basis
    /// `Q_l ∪ P` (the first half of double hoisting): one decomposition of
    /// `a`'s second part shared by all (as [`Evaluator::rotate_hoisted`]),
    /// each rotation's key-switch inner product **not** divided by `P`, and
    /// `P·σ(c0)` added to its `Q` limbs. A step of 0 gives `[P·a | 0]`.
    /// Each nonzero step needs a direct key.
    ///
    /// # Errors
    /// [`KeyError::MissingRotationKey`] without a direct key; a ciphertext
    /// of another context; allocation and backend errors.
    pub fn rotate_hoisted_extended(
        &self,
        a: &Ciphertext,
        steps: &[i64],
    ) -> Result<Vec<ExtendedCiphertext>> {
        self.context.check_same(&a.context)?;
        let params = self.context.params();
        let qp = params.qp_indices(a.level)?;
        let q_count = a.level.primes();
        let scalars = params.p_mod_q(a.level);
        let slots = a.slots as i64;
        let any_rotation = steps.iter().any(|s| s.rem_euclid(slots) != 0);
        let decomposition = if any_rotation {
            Some(decompose(params, &a.c1, a.level)?)
        } else {
            None
        };
        // P·c0 over Q_l: each rotation adds σ(P·c0) = P·σ(c0).
        let mut pc0 = a.c0.clone_as(MemoryClass::Temporary)?;
        pc0.scalar_assign(BinaryOp::Mul, &scalars)?;
        let mut out = Vec::with_capacity(steps.len());
        for &step in steps {
            let k = step.rem_euclid(slots) as usize;
            let (c0, c1) = match (k, decomposition.as_ref()) {
                (0, _) | (_, None) => (
                    times_p_extended(&a.c0, &qp, &scalars)?,
                    times_p_extended(&a.c1, &qp, &scalars)?,
                ),
                (k, Some(decomposition)) => {
                    let (g, key) = self
                        .direct_rotation_key(k, a.slots)?
                        .ok_or(KeyError::MissingRotationKey { step })?;
                    let (mut k0, k1) = inner_product(params, decomposition, key, Some(g))?;
                    let rotated = pc0.automorphism(g, MemoryClass::Temporary)?;
                    let backend = std::sync::Arc::clone(k0.backend());
                    backend.binary_assign(
                        BinaryOp::Add,
                        k0.prefix_mut(q_count)?,
                        rotated.limbs()?,
                    )?;
                    (k0, k1)
                }
            };
            out.push(ExtendedCiphertext {
                context: self.context.clone(),
                c0,
                c1,
                level: a.level,
                scale: a.scale,
                slots: a.slots,
            });
        }
        Ok(out)
    }

    /// Checks that `p` is an extended plaintext that can multiply `a`.
    fn check_extended_plain(&self, a: &ExtendedCiphertext, p: &Plaintext) -> Result<()> {
        self.context.check_same(&a.context)?;
        a.check_matches(&p.context, p.level, a.scale, p.slots, p.device())?;
        if p.moduli() != a.c0.moduli() {
            return Err(Error::LengthMismatch {
                expected: a.c0.limb_count(),
                actual: p.moduli().len(),
            });
        }
        Ok(())
    }

    /// `a·p` over `Q_l ∪ P`, no rescale (scale `Δ_a·Δ_p`): `p` must be an
    /// extended plaintext ([`Plaintext::is_extended`]) of `a`'s level.
    ///
    /// # Errors
    /// Mismatched contexts, devices, levels or slots; a plaintext over
    /// `Q_l` only ([`Error::LengthMismatch`]).
    pub fn mult_plain_extended(
        &self,
        a: &ExtendedCiphertext,
        p: &Plaintext,
    ) -> Result<ExtendedCiphertext> {
        self.check_extended_plain(a, p)?;
        Ok(ExtendedCiphertext {
            context: self.context.clone(),
            c0: RnsPoly::mul_sum_periodic(&[(&a.c0, p.factor()?)], MemoryClass::Temporary)?,
            c1: RnsPoly::mul_sum_periodic(&[(&a.c1, p.factor()?)], MemoryClass::Temporary)?,
            level: a.level,
            scale: Scale(a.scale.0 * p.scale.0),
            slots: a.slots,
        })
    }

    /// `acc += a·p` over `Q_l ∪ P` in place (the inner sums of double
    /// hoisting): `acc`'s scale must be `a`'s times `p`'s.
    ///
    /// # Errors
    /// As [`Evaluator::mult_plain_extended`]; a mismatched `acc`.
    pub fn mult_plain_extended_add_assign(
        &self,
        acc: &mut ExtendedCiphertext,
        a: &ExtendedCiphertext,
        p: &Plaintext,
    ) -> Result<()> {
        self.check_extended_plain(a, p)?;
        acc.check_matches(
            &a.context,
            a.level,
            Scale(a.scale.0 * p.scale.0),
            a.slots,
            a.device(),
        )?;
        acc.c0.mul_sum_periodic_assign(&[(&a.c0, p.factor()?)])?;
        acc.c1.mul_sum_periodic_assign(&[(&a.c1, p.factor()?)])
    }

    /// `acc += b` over `Q_l ∪ P`.
    ///
    /// # Errors
    /// Mismatched contexts, devices, levels, scales or slots.
    pub fn add_extended_assign(
        &self,
        acc: &mut ExtendedCiphertext,
        b: &ExtendedCiphertext,
    ) -> Result<()> {
        self.context.check_same(&acc.context)?;
        acc.check_matches(&b.context, b.level, b.scale, b.slots, b.device())?;
        acc.c0.add_assign(&b.c0)?;
        acc.c1.add_assign(&b.c1)
    }

    /// Rotates an extended ciphertext, staying in `Q_l ∪ P` (a giant step
    /// of double hoisting): ModDown of the second part only, its
    /// decomposition and key-switch inner product (not divided by `P`),
    /// plus the automorphism of the first part over `Q_l ∪ P`. One ModDown
    /// of one part instead of a pair, and no division of the first part.
    /// Needs a direct key.
    ///
    /// # Errors
    /// [`KeyError::MissingRotationKey`] without a direct key; a ciphertext
    /// of another context; allocation and backend errors.
    pub fn rotate_extended(
        &self,
        a: &ExtendedCiphertext,
        steps: i64,
    ) -> Result<ExtendedCiphertext> {
        self.context.check_same(&a.context)?;
        let params = self.context.params();
        let k = steps.rem_euclid(a.slots as i64) as usize;
        let (c0, c1) = if k == 0 {
            (
                a.c0.clone_as(MemoryClass::Temporary)?,
                a.c1.clone_as(MemoryClass::Temporary)?,
            )
        } else {
            let (g, key) = self
                .direct_rotation_key(k, a.slots)?
                .ok_or(KeyError::MissingRotationKey { step: steps })?;
            let backend = a.c1.backend();
            let q = params.q_indices(a.level)?;
            let mut c1 = RnsPoly::<Ntt>::allocate(backend, &q, MemoryClass::Temporary, false)?;
            backend.mod_down(a.c1.limbs()?, params.p_moduli().len(), c1.limbs_mut()?)?;
            let decomposition = decompose(params, &c1, a.level)?;
            drop(c1);
            let (mut k0, k1) = inner_product(params, &decomposition, key, Some(g))?;
            let rotated = a.c0.automorphism(g, MemoryClass::Temporary)?;
            k0.add_assign(&rotated)?;
            (k0, k1)
        };
        Ok(ExtendedCiphertext {
            context: self.context.clone(),
            c0,
            c1,
            level: a.level,
            scale: a.scale,
            slots: a.slots,
        })
    }

    /// Divides an extended ciphertext by `P` (ModDown of both parts, one
    /// launch pair on the GPU): the ordinary ciphertext at the same level
    /// and scale, in this evaluator's output class.
    ///
    /// # Errors
    /// A ciphertext of another context; allocation and backend errors.
    pub fn mod_down_extended(&self, a: &ExtendedCiphertext) -> Result<Ciphertext> {
        self.context.check_same(&a.context)?;
        let params = self.context.params();
        let backend = a.c0.backend();
        let q = params.q_indices(a.level)?;
        let mut c0 = RnsPoly::<Ntt>::allocate(backend, &q, self.output_class, false)?;
        let mut c1 = RnsPoly::<Ntt>::allocate(backend, &q, self.output_class, false)?;
        backend.mod_down_pair(
            [a.c0.limbs()?, a.c1.limbs()?],
            params.p_moduli().len(),
            [None, None],
            [c0.limbs_mut()?, c1.limbs_mut()?],
        )?;
        Ciphertext::from_parts(&self.context, c0, c1, a.level, a.scale, a.slots)
    }
}
