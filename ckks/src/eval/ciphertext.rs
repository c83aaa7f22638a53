//! [`Ciphertext`].

use std::sync::Arc;

use hemem_memory::MemoryClass;

use crate::backend::{Backend, Device};
use crate::context::Context;
use crate::params::{Level, Scale};
use crate::poly::{Ntt, RnsPoly};
use crate::{OperandError, Result};

/// A CKKS ciphertext `(c0, c1)` with `c0 + c1·s ≈ Δ·m`, in NTT form over
/// `q_0 … q_level`, carrying its exact scale Δ and its slot count.
#[derive(Debug)]
pub struct Ciphertext {
    pub(crate) context: Context,
    pub(crate) c0: RnsPoly<Ntt>,
    pub(crate) c1: RnsPoly<Ntt>,
    pub(crate) level: Level,
    pub(crate) scale: Scale,
    pub(crate) slots: usize,
}

impl Ciphertext {
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

    /// Where the ciphertext lives.
    pub fn device(&self) -> Device {
        self.c0.device()
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The two polynomials.
    pub fn parts(&self) -> (&RnsPoly<Ntt>, &RnsPoly<Ntt>) {
        (&self.c0, &self.c1)
    }

    /// Bytes of the two polynomials.
    pub fn size_bytes(&self) -> usize {
        self.c0.buffer().bytes() + self.c1.buffer().bytes()
    }

    /// A ciphertext from parts (checked to agree).
    pub(crate) fn from_parts(
        context: &Context,
        c0: RnsPoly<Ntt>,
        c1: RnsPoly<Ntt>,
        level: Level,
        scale: Scale,
        slots: usize,
    ) -> Result<Self> {
        c0.check_compatible(&c1)?;
        Ok(Self {
            context: context.clone(),
            c0,
            c1,
            level,
            scale,
            slots,
        })
    }

    /// A copy in `Ciphertext`-class memory.
    ///
    /// # Errors
    /// Allocation errors.
    pub fn try_clone(&self) -> Result<Self> {
        self.clone_as(MemoryClass::Ciphertext)
    }

    /// A copy in `class` memory.
    ///
    /// # Errors
    /// Allocation errors.
    pub fn clone_as(&self, class: MemoryClass) -> Result<Self> {
        Ok(Self {
            context: self.context.clone(),
            c0: self.c0.clone_as(class)?,
            c1: self.c1.clone_as(class)?,
            level: self.level,
            scale: self.scale,
            slots: self.slots,
        })
    }

    /// The same ciphertext on the context's device.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_device(&self) -> Result<Self> {
        self.moved(Arc::clone(self.context.backend()))
    }

    /// The same ciphertext in host memory.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_host(&self) -> Result<Self> {
        self.moved(Arc::clone(self.context.host_backend()))
    }

    fn moved(&self, backend: Arc<dyn Backend>) -> Result<Self> {
        Ok(Self {
            context: self.context.clone(),
            c0: self.c0.to_backend(&backend)?,
            c1: self.c1.to_backend(&backend)?,
            level: self.level,
            scale: self.scale,
            slots: self.slots,
        })
    }

    /// Checks that `other` can be combined with this ciphertext: same
    /// context, device, level, scale and slot count.
    ///
    /// # Errors
    /// The matching [`OperandError`].
    pub(crate) fn check_matches(
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

/// The three-part result of a ciphertext product before relinearisation,
/// `(d0, d1, d2)` with `d0 + d1·s + d2·s² ≈ Δ_a·Δ_b·m_a·m_b`.
#[derive(Debug)]
pub struct TensoredCiphertext {
    pub(crate) context: Context,
    pub(crate) d0: RnsPoly<Ntt>,
    pub(crate) d1: RnsPoly<Ntt>,
    pub(crate) d2: RnsPoly<Ntt>,
    pub(crate) level: Level,
    pub(crate) scale: Scale,
    pub(crate) slots: usize,
}

impl TensoredCiphertext {
    /// The level.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The exact scale (the product of the factors' scales).
    pub fn scale(&self) -> Scale {
        self.scale
    }

    /// The slot count.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// What another tensored ciphertext must share to be added to this one.
    pub(crate) fn operand(&self) -> Operand<'_> {
        Operand {
            context: &self.context,
            device: self.d0.device(),
            level: self.level,
            scale: self.scale,
            slots: self.slots,
        }
    }
}

/// What two operands must share to be combined (a [`Ciphertext`] or an
/// extended ciphertext of double hoisting, and the other operand).
pub(crate) struct Operand<'a> {
    pub(crate) context: &'a Context,
    pub(crate) device: Device,
    pub(crate) level: Level,
    pub(crate) scale: Scale,
    pub(crate) slots: usize,
}

/// Checks that `right` agrees with `left` in context, device, level, scale
/// and slot count.
///
/// # Errors
/// The matching [`OperandError`].
pub(crate) fn check_operands(left: Operand<'_>, right: Operand<'_>) -> Result<()> {
    left.context.check_same(right.context)?;
    if left.device != right.device {
        return Err(OperandError::DeviceMismatch {
            left: left.device,
            right: right.device,
        }
        .into());
    }
    if left.level != right.level {
        return Err(OperandError::LevelMismatch {
            left: left.level,
            right: right.level,
        }
        .into());
    }
    if !left.scale.matches(right.scale) {
        return Err(OperandError::ScaleMismatch {
            left_log2: left.scale.log2(),
            right_log2: right.scale.log2(),
        }
        .into());
    }
    if left.slots != right.slots {
        return Err(OperandError::SlotsMismatch {
            left: left.slots,
            right: right.slots,
        }
        .into());
    }
    Ok(())
}
