//! [`Plaintext`]: an encoded message at a level and scale.

use hemem_memory::MemoryClass;

use crate::Result;
use crate::backend::Device;
use crate::context::Context;
use crate::params::{Level, Scale};
use crate::poly::{Ntt, RnsPoly};

/// An encoded message: a polynomial in NTT form over `q_0 … q_level`, with
/// the exact scale it was encoded at and its slot count.
#[derive(Debug)]
pub struct Plaintext {
    pub(crate) context: Context,
    pub(crate) poly: RnsPoly<Ntt>,
    pub(crate) level: Level,
    pub(crate) scale: Scale,
    pub(crate) slots: usize,
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
        self.poly.device()
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Whether the plaintext also has its residues modulo the special
    /// primes (over `Q_level ∪ P`, for double hoisting; see
    /// [`crate::eval::ExtendedCiphertext`]).
    pub fn is_extended(&self) -> bool {
        self.poly.limb_count() > self.level.primes()
    }

    /// The polynomial (NTT form).
    pub fn poly(&self) -> &RnsPoly<Ntt> {
        &self.poly
    }

    /// A copy.
    ///
    /// # Errors
    /// Allocation errors.
    pub fn try_clone(&self) -> Result<Self> {
        Ok(Self {
            context: self.context.clone(),
            poly: self.poly.clone_as(MemoryClass::Plaintext)?,
            level: self.level,
            scale: self.scale,
            slots: self.slots,
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
        Ok(Self {
            context: self.context.clone(),
            poly: self.poly.to_backend(&backend)?,
            level: self.level,
            scale: self.scale,
            slots: self.slots,
        })
    }
}
