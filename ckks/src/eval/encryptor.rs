//! [`Encryptor`]: public-key encryption in `QP` followed by ModDown, and
//! secret-key encryption.

use std::sync::{Mutex, MutexGuard, PoisonError};

use hemem_memory::MemoryClass;

use super::Ciphertext;
use crate::Result;
use crate::backend::{BinaryOp, Limbs};
use crate::context::Context;
use crate::encoding::Plaintext;
use crate::keys::{PublicKey, SecretKey};
use crate::params::ERROR_STD_DEV;
use crate::poly::{Coeff, Ntt, RnsPoly};
use crate::sampling::Sampler;

/// Encrypts plaintexts, with randomness from a ChaCha20 stream seeded from
/// the operating system (or, with the `test-utils` feature, a fixed seed for
/// reproducible tests). Sampling is not constant time (see
/// [`crate::sampling`], "Timing").
#[derive(Debug)]
pub struct Encryptor {
    context: Context,
    sampler: Mutex<Sampler>,
}

impl Encryptor {
    /// An encryptor seeded from the operating system.
    ///
    /// # Errors
    /// [`crate::Error::Entropy`] if the OS source fails.
    pub fn new(context: &Context) -> Result<Self> {
        Ok(Self {
            context: context.clone(),
            sampler: Mutex::new(Sampler::from_os()?),
        })
    }

    /// An encryptor with a fixed seed: reproducible, for tests and
    /// benchmarks only (behind the `test-utils` feature).
    ///
    /// # Security
    ///
    /// Everything it draws is a function of `seed`: whoever knows or guesses
    /// the seed recomputes the ephemeral `v` and the errors of every
    /// encryption it makes, and with them the messages; two encryptors given
    /// the same seed reuse that randomness, which reveals the difference of
    /// the messages they encrypt.
    /// Real use wants [`Self::new`], seeded from the operating system.
    #[cfg(any(test, feature = "test-utils"))]
    pub fn with_seed(context: &Context, seed: [u8; 32]) -> Self {
        Self {
            context: context.clone(),
            sampler: Mutex::new(Sampler::from_seed(seed)),
        }
    }

    fn sampler(&self) -> MutexGuard<'_, Sampler> {
        self.sampler.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Public-key encryption at the plaintext's level.
    ///
    /// The encryption runs over `Q_l ∪ P`: `(v·b + e0 + P·m, v·a + e1)` with
    /// `v ← ZO(1/2)` and Gaussian `e0, e1`, then divides by `P` (ModDown). The
    /// key's noise shrinks by `P`, leaving only the rounding noise of about
    /// `√((1+h)/12)` per coefficient.
    ///
    /// # Errors
    /// [`crate::OperandError::ContextMismatch`]; allocation errors.
    pub fn encrypt(&self, plaintext: &Plaintext, key: &PublicKey) -> Result<Ciphertext> {
        self.context.check_same(&plaintext.context)?;
        self.context.check_same(&key.context)?;
        let params = self.context.params();
        let backend = self.context.backend();
        let n = params.degree().get();
        let level = plaintext.level;
        let q_count = level.primes();
        let p_count = params.p_moduli().len();
        let qp = params.qp_indices(level)?;
        // Positions of Q_l ∪ P in the key's Q_L ∪ P layout: the same indices.
        let key_positions = qp.clone();

        let (v, e0, e1) = {
            let mut s = self.sampler();
            (
                s.zero_one(n),
                s.gaussian(n, ERROR_STD_DEV)?,
                s.gaussian(n, ERROR_STD_DEV)?,
            )
        };
        let v = RnsPoly::<Coeff>::from_signed(backend, &qp, MemoryClass::Temporary, &v, false)?
            .into_ntt()?;
        let mut c0 =
            RnsPoly::<Coeff>::from_signed(backend, &qp, MemoryClass::Temporary, &e0, false)?
                .into_ntt()?;
        let mut c1 =
            RnsPoly::<Coeff>::from_signed(backend, &qp, MemoryClass::Temporary, &e1, false)?
                .into_ntt()?;
        let b = Limbs {
            buffer: key.b.buffer(),
            positions: &key_positions,
            moduli: &qp,
        };
        let a = Limbs {
            buffer: key.a.buffer(),
            positions: &key_positions,
            moduli: &qp,
        };
        backend.mul_add_assign(c0.limbs_mut()?, v.limbs()?, b)?;
        backend.mul_add_assign(c1.limbs_mut()?, v.limbs()?, a)?;

        // c0 += P·m on the Q limbs (P·m ≡ 0 modulo the special primes).
        let mut pm = plaintext.poly()?.clone_as(MemoryClass::Temporary)?;
        pm.scalar_assign(BinaryOp::Mul, &params.p_mod_q(level))?;
        backend.binary_assign(BinaryOp::Add, c0.prefix_mut(q_count)?, pm.limbs()?)?;

        let q_indices = params.q_indices(level)?;
        let mut d0 = RnsPoly::<Ntt>::allocate(backend, &q_indices, MemoryClass::Ciphertext, false)?;
        let mut d1 = RnsPoly::<Ntt>::allocate(backend, &q_indices, MemoryClass::Ciphertext, false)?;
        backend.mod_down_pair(
            [c0.limbs()?, c1.limbs()?],
            p_count,
            [None, None],
            [d0.limbs_mut()?, d1.limbs_mut()?],
        )?;
        Ciphertext::from_parts(
            &self.context,
            d0,
            d1,
            level,
            plaintext.scale,
            plaintext.slots,
        )
    }

    /// Secret-key encryption at the plaintext's level: `(−a·s + e + m, a)`
    /// with `a` uniform over `Q_l`. The temporary `a·s` is sensitive memory,
    /// zeroed before this returns.
    ///
    /// # Errors
    /// [`crate::OperandError::ContextMismatch`]; allocation errors;
    /// [`hemem_memory::Error::ZeroingFailed`] when `a·s` could not be zeroed.
    pub fn encrypt_symmetric(&self, plaintext: &Plaintext, key: &SecretKey) -> Result<Ciphertext> {
        self.context.check_same(&plaintext.context)?;
        self.context.check_same(&key.context)?;
        let params = self.context.params();
        let backend = self.context.backend();
        let n = params.degree().get();
        let level = plaintext.level;
        let q = params.q_indices(level)?;
        let (a, e) = {
            let mut s = self.sampler();
            let a = RnsPoly::<Ntt>::uniform(backend, &q, MemoryClass::Ciphertext, &mut s)?;
            (a, s.gaussian(n, ERROR_STD_DEV)?)
        };
        let mut c0 =
            RnsPoly::<Coeff>::from_signed(backend, &q, MemoryClass::Ciphertext, &e, false)?
                .into_ntt()?;
        c0.add_assign(plaintext.poly()?)?;
        let mut moduli = Vec::new();
        let s = key.poly.select(&q, &mut moduli)?;
        // a·s is secret (with a it gives s): sensitive, and released here so
        // that a failure to zero it is this call's error.
        let mut a_s =
            RnsPoly::<Ntt>::allocate(backend, &q, MemoryClass::Temporary, s.is_sensitive())?;
        backend.binary(BinaryOp::Mul, a.limbs()?, s, a_s.limbs_mut()?)?;
        c0.sub_assign(&a_s)?;
        a_s.release()?;
        Ciphertext::from_parts(
            &self.context,
            c0,
            a,
            level,
            plaintext.scale,
            plaintext.slots,
        )
    }
}
