//! [`Plaintext`]: an encoded message at a level and scale.

use hemem_memory::MemoryClass;

use crate::backend::{Device, PeriodicLimbs};
use crate::context::Context;
use crate::params::{Level, Scale};
use crate::poly::{Ntt, PeriodicPoly, RnsPoly};
use crate::{OperandError, Result};

/// An encoded message: a polynomial in NTT form over `q_0 … q_level`, with
/// the exact scale it was encoded at and its slot count.
///
/// A plaintext whose message repeats a short period may be kept periodic
/// ([`Plaintext::is_periodic`], made by [`super::Encoder::expand_periodic`]
/// and [`super::CompactPlaintext::expand_all_periodic`]): its limbs hold
/// only their distinct values. Such a plaintext multiplies ciphertexts
/// ([`crate::eval::Evaluator::mult_plain`] and its sums) like the full one,
/// bit for bit; every other use asks for the full form and refuses it
/// ([`OperandError::PeriodicPlaintext`]).
#[derive(Debug)]
pub struct Plaintext {
    pub(crate) context: Context,
    pub(crate) form: Form,
    pub(crate) level: Level,
    pub(crate) scale: Scale,
    pub(crate) slots: usize,
}

/// How a [`Plaintext`]'s limbs are kept.
#[derive(Debug)]
pub(crate) enum Form {
    /// Every limb's `N` values.
    Full(RnsPoly<Ntt>),
    /// The distinct values of a polynomial in `X^gap` ([`PeriodicPoly`]).
    Periodic(PeriodicPoly),
}

impl Plaintext {
    /// The level.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The exact scale.
    pub fn scale(&self) -> Scale {
        self.scale
    }

    /// The slot count.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Where the plaintext lives.
    pub fn device(&self) -> Device {
        match &self.form {
            Form::Full(p) => p.device(),
            Form::Periodic(p) => p.device(),
        }
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Whether the plaintext also has its residues modulo the special
    /// primes (over `Q_level ∪ P`, for double hoisting; see
    /// [`crate::eval::ExtendedCiphertext`]).
    pub fn is_extended(&self) -> bool {
        self.moduli().len() > self.level.primes()
    }

    /// Whether the limbs are kept periodic: only the `N/gap` distinct
    /// values of a polynomial in `X^gap`.
    pub fn is_periodic(&self) -> bool {
        matches!(self.form, Form::Periodic(_))
    }

    /// The global modulus index of each limb.
    pub fn moduli(&self) -> &[usize] {
        match &self.form {
            Form::Full(p) => p.moduli(),
            Form::Periodic(p) => p.moduli(),
        }
    }

    /// Bytes held: `N` words a limb, or `N/gap` for a periodic plaintext.
    pub fn size_bytes(&self) -> usize {
        match &self.form {
            Form::Full(p) => p.buffer().bytes(),
            Form::Periodic(p) => p.buffer().bytes(),
        }
    }

    /// The polynomial (NTT form).
    ///
    /// # Errors
    /// [`OperandError::PeriodicPlaintext`] for a periodic plaintext.
    pub fn poly(&self) -> Result<&RnsPoly<Ntt>> {
        match &self.form {
            Form::Full(p) => Ok(p),
            Form::Periodic(_) => Err(OperandError::PeriodicPlaintext.into()),
        }
    }

    /// The polynomial, mutably.
    ///
    /// # Errors
    /// As [`Plaintext::poly`].
    pub(crate) fn poly_mut(&mut self) -> Result<&mut RnsPoly<Ntt>> {
        match &mut self.form {
            Form::Full(p) => Ok(p),
            Form::Periodic(_) => Err(OperandError::PeriodicPlaintext.into()),
        }
    }

    /// The limbs as a factor of a sum of products
    /// ([`crate::backend::Backend::mul_sum_periodic`]), whichever the form.
    ///
    /// # Errors
    /// [`crate::Error::LengthMismatch`] (never for a plaintext made here).
    pub(crate) fn factor(&self) -> Result<PeriodicLimbs<'_>> {
        match &self.form {
            Form::Full(p) => Ok(p.limbs()?.into()),
            Form::Periodic(p) => p.limbs(),
        }
    }

    /// A copy.
    ///
    /// # Errors
    /// Allocation errors.
    pub fn try_clone(&self) -> Result<Self> {
        self.with_form(match &self.form {
            Form::Full(p) => Form::Full(p.clone_as(MemoryClass::Plaintext)?),
            Form::Periodic(p) => Form::Periodic(p.copy_to(p.backend(), MemoryClass::Plaintext)?),
        })
    }

    /// The same plaintext on the context's device.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_device(&self) -> Result<Self> {
        self.moved(self.context.backend().clone())
    }

    /// The same plaintext in host memory.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_host(&self) -> Result<Self> {
        self.moved(self.context.host_backend().clone())
    }

    fn moved(&self, backend: std::sync::Arc<dyn crate::backend::Backend>) -> Result<Self> {
        self.with_form(match &self.form {
            Form::Full(p) => Form::Full(p.to_backend(&backend)?),
            Form::Periodic(p) => Form::Periodic(p.copy_to(&backend, p.buffer().class())?),
        })
    }

    /// This plaintext's level, scale and slots with limbs `form`.
    fn with_form(&self, form: Form) -> Result<Self> {
        Ok(Self {
            context: self.context.clone(),
            form,
            level: self.level,
            scale: self.scale,
            slots: self.slots,
        })
    }
}
