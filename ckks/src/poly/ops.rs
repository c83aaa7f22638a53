//! Arithmetic on [`RnsPoly`], delegated to the backend. A result computed
//! from a sensitive operand (secret-key material) is allocated sensitive.

use std::sync::Arc;

use hemem_memory::MemoryClass;

use super::{Ntt, Representation, RnsPoly};
use crate::Result;
use crate::backend::{BinaryOp, PeriodicLimbs};
use crate::ntt::GaloisElement;

impl<R: Representation> RnsPoly<R> {
    fn assign_op(&mut self, op: BinaryOp, other: &Self) -> Result<()> {
        self.check_compatible(other)?;
        let backend = Arc::clone(&self.backend);
        backend.binary_assign(op, self.limbs_mut()?, other.limbs()?)
    }

    fn binary_op(&self, op: BinaryOp, other: &Self, class: MemoryClass) -> Result<Self> {
        self.check_compatible(other)?;
        let sensitive = self.is_sensitive() || other.is_sensitive();
        let mut out = Self::allocate(&self.backend, &self.moduli, class, sensitive)?;
        self.backend
            .binary(op, self.limbs()?, other.limbs()?, out.limbs_mut()?)?;
        Ok(out)
    }

    /// `self += other`.
    ///
    /// # Errors
    /// Operands on different backends or moduli.
    pub fn add_assign(&mut self, other: &Self) -> Result<()> {
        self.assign_op(BinaryOp::Add, other)
    }

    /// `self −= other`.
    ///
    /// # Errors
    /// Operands on different backends or moduli.
    pub fn sub_assign(&mut self, other: &Self) -> Result<()> {
        self.assign_op(BinaryOp::Sub, other)
    }

    /// `self + other` in a new buffer of `class`.
    ///
    /// # Errors
    /// Operands on different backends or moduli; allocation errors.
    pub fn add(&self, other: &Self, class: MemoryClass) -> Result<Self> {
        self.binary_op(BinaryOp::Add, other, class)
    }

    /// `self − other` in a new buffer of `class`.
    ///
    /// # Errors
    /// Operands on different backends or moduli; allocation errors.
    pub fn sub(&self, other: &Self, class: MemoryClass) -> Result<Self> {
        self.binary_op(BinaryOp::Sub, other, class)
    }

    /// `self = −self`.
    ///
    /// # Errors
    /// Backend errors.
    pub fn negate(&mut self) -> Result<()> {
        let backend = Arc::clone(&self.backend);
        backend.negate(self.limbs_mut()?)
    }

    /// `self op= s_i` with one scalar per limb.
    ///
    /// # Errors
    /// A scalar count other than the limb count.
    pub fn scalar_assign(&mut self, op: BinaryOp, scalars: &[u64]) -> Result<()> {
        let backend = Arc::clone(&self.backend);
        backend.scalar_assign(op, self.limbs_mut()?, scalars)
    }

    /// `self op s_i` with one scalar per limb, in a new buffer of `class`.
    ///
    /// # Errors
    /// A scalar count other than the limb count; allocation errors.
    pub fn scalar(&self, op: BinaryOp, scalars: &[u64], class: MemoryClass) -> Result<Self> {
        self.scalar_prefix(op, scalars, self.moduli.len(), class)
    }

    /// `self op s_i` over the first `count` limbs only (the top primes
    /// dropped, as [`RnsPoly::truncated`] drops them), in a new buffer of
    /// `class`: the truncation and the operation in one pass.
    ///
    /// # Errors
    /// `count` above the limb count; a scalar count other than `count`;
    /// allocation errors.
    pub fn scalar_prefix(
        &self,
        op: BinaryOp,
        scalars: &[u64],
        count: usize,
        class: MemoryClass,
    ) -> Result<Self> {
        let src = self.prefix(count)?;
        let mut out = Self::allocate(&self.backend, src.moduli, class, self.is_sensitive())?;
        self.backend.scalar(op, src, scalars, out.limbs_mut()?)?;
        Ok(out)
    }
}

impl RnsPoly<Ntt> {
    /// `self *= other` (the negacyclic product).
    ///
    /// # Errors
    /// Operands on different backends or moduli.
    pub fn mul_assign(&mut self, other: &Self) -> Result<()> {
        self.assign_op(BinaryOp::Mul, other)
    }

    /// `self · other` in a new buffer of `class`.
    ///
    /// # Errors
    /// Operands on different backends or moduli; allocation errors.
    pub fn mul(&self, other: &Self, class: MemoryClass) -> Result<Self> {
        self.binary_op(BinaryOp::Mul, other, class)
    }

    /// `self += a · b`.
    ///
    /// # Errors
    /// Operands on different backends or moduli.
    pub fn mul_add_assign(&mut self, a: &Self, b: &Self) -> Result<()> {
        self.check_compatible(a)?;
        self.check_compatible(b)?;
        let backend = Arc::clone(&self.backend);
        backend.mul_add_assign(self.limbs_mut()?, a.limbs()?, b.limbs()?)
    }

    /// `Σ_t a_t · b_t` in a new buffer of `class` ([`Backend::mul_sum`]:
    /// one pass over the operands on the GPU).
    ///
    /// # Errors
    /// No terms; operands on different backends or moduli; allocation
    /// errors.
    ///
    /// [`Backend::mul_sum`]: crate::backend::Backend::mul_sum
    pub fn mul_sum(terms: &[(&Self, &Self)], class: MemoryClass) -> Result<Self> {
        Self::mul_sum_periodic(&Self::whole_factors(terms)?, class)
    }

    /// `self += Σ_t a_t · b_t` ([`RnsPoly::mul_sum`], accumulated).
    ///
    /// # Errors
    /// Operands on different backends or moduli.
    pub fn mul_sum_assign(&mut self, terms: &[(&Self, &Self)]) -> Result<()> {
        self.sum_periodic_products(&Self::whole_factors(terms)?, true)
    }

    /// Each term's second operand as a factor kept whole, after checking
    /// that it lives with the first.
    fn whole_factors<'t>(
        terms: &[(&'t Self, &'t Self)],
    ) -> Result<Vec<(&'t Self, PeriodicLimbs<'t>)>> {
        terms
            .iter()
            .map(|&(a, b)| {
                a.check_compatible(b)?;
                Ok((a, b.limbs()?.into()))
            })
            .collect()
    }

    /// [`RnsPoly::mul_sum`] with second operands that may repeat
    /// ([`PeriodicLimbs`]: a periodic plaintext read in place, or a full
    /// one's limbs), each over this polynomial's moduli.
    ///
    /// # Errors
    /// As [`RnsPoly::mul_sum`].
    pub(crate) fn mul_sum_periodic(
        terms: &[(&Self, PeriodicLimbs<'_>)],
        class: MemoryClass,
    ) -> Result<Self> {
        let (first, _) = terms.first().ok_or(crate::Error::LengthMismatch {
            expected: 1,
            actual: 0,
        })?;
        let sensitive = terms
            .iter()
            .any(|(a, b)| a.is_sensitive() || b.stored().is_sensitive());
        let mut out = Self::allocate(&first.backend, &first.moduli, class, sensitive)?;
        out.sum_periodic_products(terms, false)?;
        Ok(out)
    }

    /// `self += Σ_t a_t · b_t` ([`RnsPoly::mul_sum_periodic`], accumulated).
    ///
    /// # Errors
    /// As [`RnsPoly::mul_sum_assign`].
    pub(crate) fn mul_sum_periodic_assign(
        &mut self,
        terms: &[(&Self, PeriodicLimbs<'_>)],
    ) -> Result<()> {
        self.sum_periodic_products(terms, true)
    }

    fn sum_periodic_products(
        &mut self,
        terms: &[(&Self, PeriodicLimbs<'_>)],
        accumulate: bool,
    ) -> Result<()> {
        let mut views = Vec::with_capacity(terms.len());
        for (a, b) in terms {
            self.check_compatible(a)?;
            if b.stored().moduli() != &*self.moduli {
                return Err(crate::Error::LengthMismatch {
                    expected: self.moduli.len(),
                    actual: b.len(),
                });
            }
            views.push((a.limbs()?, *b));
        }
        let backend = Arc::clone(&self.backend);
        backend.mul_sum_periodic(self.limbs_mut()?, &views, accumulate)
    }

    /// Divides by the last limb's prime with rounding, dropping that limb.
    ///
    /// # Errors
    /// A single-limb polynomial; allocation errors.
    pub fn rescale(&self, class: MemoryClass) -> Result<Self> {
        let kept = self.moduli.len().checked_sub(1).filter(|&k| k > 0).ok_or(
            crate::Error::LengthMismatch {
                expected: 2,
                actual: self.moduli.len(),
            },
        )?;
        let moduli: Vec<usize> = self.moduli.iter().take(kept).copied().collect();
        let mut out = Self::allocate(&self.backend, &moduli, class, self.is_sensitive())?;
        self.backend.rescale(self.limbs()?, out.limbs_mut()?)?;
        Ok(out)
    }

    /// [`RnsPoly::rescale`] of two polynomials of the same moduli (a
    /// ciphertext's parts) through one [`crate::backend::Backend::rescale_pair`].
    ///
    /// # Errors
    /// Operands on different backends or moduli; a single-limb polynomial;
    /// allocation errors.
    pub fn rescale_pair(&self, other: &Self, class: MemoryClass) -> Result<(Self, Self)> {
        self.check_compatible(other)?;
        let kept = self.moduli.len().checked_sub(1).filter(|&k| k > 0).ok_or(
            crate::Error::LengthMismatch {
                expected: 2,
                actual: self.moduli.len(),
            },
        )?;
        let moduli: Vec<usize> = self.moduli.iter().take(kept).copied().collect();
        let mut out0 = Self::allocate(&self.backend, &moduli, class, self.is_sensitive())?;
        let mut out1 = Self::allocate(&self.backend, &moduli, class, other.is_sensitive())?;
        self.backend.rescale_pair(
            [self.limbs()?, other.limbs()?],
            [out0.limbs_mut()?, out1.limbs_mut()?],
        )?;
        Ok((out0, out1))
    }

    /// `X ↦ X^g` in a new buffer of `class` (`g` taken modulo `2N`).
    ///
    /// # Errors
    /// [`KeyError::InvalidGaloisElement`](crate::KeyError::InvalidGaloisElement)
    /// for an even `g`; allocation errors.
    pub fn automorphism(&self, g: GaloisElement, class: MemoryClass) -> Result<Self> {
        let mut out = Self::allocate(&self.backend, &self.moduli, class, self.is_sensitive())?;
        self.backend
            .automorphism(self.limbs()?, g, out.limbs_mut()?)?;
        Ok(out)
    }
}
