//! [`Decryptor`].

use hemem_memory::MemoryClass;

use super::Ciphertext;
use crate::Result;
use crate::backend::BinaryOp;
use crate::context::Context;
use crate::encoding::Plaintext;
use crate::keys::SecretKey;
use crate::poly::{Ntt, RnsPoly};

/// Decrypts ciphertexts with the secret key: `m = c0 + c1·s`.
///
/// Plain decryption reveals the ciphertext's noise along with the message;
/// results that leave the secret-key holder should use the noise-flooding
/// decryption of the evaluator issue instead (Li–Micciancio, 2021).
#[derive(Clone, Debug)]
pub struct Decryptor {
    context: Context,
}

impl Decryptor {
    /// A decryptor for `context`.
    pub fn new(context: &Context) -> Self {
        Self {
            context: context.clone(),
        }
    }

    /// `c0 + c1·s` as a plaintext at the ciphertext's level and scale.
    ///
    /// # Errors
    /// [`crate::OperandError::ContextMismatch`] or
    /// [`crate::OperandError::DeviceMismatch`]; allocation errors.
    pub fn decrypt(&self, ciphertext: &Ciphertext, key: &SecretKey) -> Result<Plaintext> {
        self.context.check_same(&ciphertext.context)?;
        self.context.check_same(&key.context)?;
        let backend = ciphertext.c0.backend();
        if ciphertext.device() != key.poly.device() {
            return Err(crate::OperandError::DeviceMismatch {
                left: ciphertext.device(),
                right: key.poly.device(),
            }
            .into());
        }
        let moduli = ciphertext.c0.moduli().to_vec();
        let mut selected = Vec::new();
        let s = key.poly.select(&moduli, &mut selected)?;
        let mut m = RnsPoly::<Ntt>::allocate(backend, &moduli, MemoryClass::Plaintext, false)?;
        backend.binary(BinaryOp::Mul, ciphertext.c1.limbs()?, s, m.limbs_mut()?)?;
        m.add_assign(&ciphertext.c0)?;
        Ok(Plaintext {
            context: self.context.clone(),
            poly: m,
            level: ciphertext.level,
            scale: ciphertext.scale,
            slots: ciphertext.slots,
        })
    }
}
