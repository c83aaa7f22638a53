//! [`KeyGenerator`].

use std::sync::{Mutex, MutexGuard, PoisonError};

use hemem_memory::MemoryClass;

use super::{PublicKey, SecretKey};
use crate::Result;
use crate::context::Context;
use crate::params::ERROR_STD_DEV;
use crate::poly::{Coeff, Ntt, RnsPoly};
use crate::sampling::Sampler;

/// Makes keys for a context, drawing randomness from a ChaCha20 stream seeded
/// from the operating system (or from a fixed seed, for reproducible tests).
#[derive(Debug)]
pub struct KeyGenerator {
    context: Context,
    sampler: Mutex<Sampler>,
}

impl KeyGenerator {
    /// A key generator seeded from the operating system.
    ///
    /// # Errors
    /// [`crate::Error::Entropy`] if the OS source fails.
    pub fn new(context: &Context) -> Result<Self> {
        Ok(Self {
            context: context.clone(),
            sampler: Mutex::new(Sampler::from_os()?),
        })
    }

    /// A key generator with a fixed seed (reproducible; for tests only).
    pub fn with_seed(context: &Context, seed: [u8; 32]) -> Self {
        Self {
            context: context.clone(),
            sampler: Mutex::new(Sampler::from_seed(seed)),
        }
    }

    pub(crate) fn sampler(&self) -> MutexGuard<'_, Sampler> {
        self.sampler.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// A fresh secret key with exactly the preset's Hamming weight.
    ///
    /// # Errors
    /// Allocation errors.
    pub fn secret_key(&self) -> Result<SecretKey> {
        let params = self.context.params();
        let coefficients = self
            .sampler()
            .ternary_with_weight(params.degree().get(), params.hamming_weight());
        SecretKey::from_coefficients(&self.context, coefficients)
    }

    /// An RLWE pair `(−a·s + e, a)` over the moduli `moduli` (global indices,
    /// a subset of the secret key's), with `a` uniform and `e` Gaussian.
    pub(crate) fn rlwe_sample(
        &self,
        secret: &SecretKey,
        moduli: &[usize],
        class: MemoryClass,
        sampler: &mut Sampler,
    ) -> Result<(RnsPoly<Ntt>, RnsPoly<Ntt>)> {
        self.context.check_same(&secret.context)?;
        let backend = self.context.backend();
        let n = self.context.params().degree().get();
        let a = RnsPoly::<Ntt>::uniform(backend, moduli, class, sampler)?;
        let e = sampler.gaussian(n, ERROR_STD_DEV);
        let mut b = RnsPoly::<Coeff>::from_signed(backend, moduli, class, &e, false)?.into_ntt()?;
        let mut s_moduli = Vec::new();
        let s = secret.poly.select(moduli, &mut s_moduli)?;
        let mut a_s = RnsPoly::<Ntt>::allocate(backend, moduli, MemoryClass::Temporary, false)?;
        backend.binary(
            crate::backend::BinaryOp::Mul,
            a.limbs()?,
            s,
            a_s.limbs_mut()?,
        )?;
        b.sub_assign(&a_s)?;
        Ok((b, a))
    }

    /// The public key for `secret`, over `Q_L ∪ P`.
    ///
    /// # Errors
    /// [`crate::OperandError::ContextMismatch`]; allocation errors.
    pub fn public_key(&self, secret: &SecretKey) -> Result<PublicKey> {
        let moduli: Vec<usize> = self
            .context
            .params()
            .qp_indices(self.context.params().max_level());
        let mut sampler = self.sampler();
        let (b, a) = self.rlwe_sample(secret, &moduli, MemoryClass::EvaluationKey, &mut sampler)?;
        Ok(PublicKey {
            context: self.context.clone(),
            b,
            a,
        })
    }
}
