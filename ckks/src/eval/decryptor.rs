//! [`Decryptor`].

use hemem_memory::MemoryClass;

use super::{Ciphertext, NoiseFlooding};
use crate::backend::BinaryOp;
use crate::context::Context;
use crate::encoding::{Form, Plaintext};
use crate::keys::SecretKey;
use crate::poly::{Coeff, Ntt, RnsPoly};
use crate::sampling::Sampler;
use crate::{OperandError, Result};

/// Decrypts ciphertexts with the secret key: `m = c0 + c1·s`.
///
/// # Which decryption to use
///
/// * [`Decryptor::decrypt`] returns `Δ·m + e` with the ciphertext's noise
///   `e` intact. Use it when the result stays with the secret-key holder.
/// * [`Decryptor::decrypt_flooded`] adds fresh Gaussian noise before
///   decoding. Use it whenever a decrypted result **leaves** the secret-key
///   holder: Li and Micciancio (EUROCRYPT 2021, ePrint 2020/1533) showed that
///   `Δ·m + e`, together with the ciphertext, lets anyone solve for the secret
///   key, because `e` is a known function of the key. See [`NoiseFlooding`]
///   for the widths and what each protects against.
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
    /// The plaintext's memory is sensitive (zeroed before it is reused or
    /// released, and so is every temporary decoding computes from it): with
    /// the ciphertext, `c1·s` — and the noisy `Δ·m + e` — reveal the key.
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
        let mut m =
            RnsPoly::<Ntt>::allocate(backend, &moduli, MemoryClass::Plaintext, s.is_sensitive())?;
        backend.binary(BinaryOp::Mul, ciphertext.c1.limbs()?, s, m.limbs_mut()?)?;
        m.add_assign(&ciphertext.c0)?;
        Ok(Plaintext {
            context: self.context.clone(),
            form: Form::Full(m),
            level: ciphertext.level,
            scale: ciphertext.scale,
            slots: ciphertext.slots,
        })
    }

    /// Decrypts and floods the result with fresh Gaussian noise of the width
    /// `flooding` prescribes, drawn from a ChaCha20 stream seeded from the
    /// operating system: for results that leave the secret-key holder.
    ///
    /// # Errors
    /// As [`Decryptor::decrypt`]; [`OperandError::InvalidFlooding`] for an
    /// explicit width below one coefficient unit or not finite, or a
    /// claimed precision that is not finite or lies outside
    /// `(0, log2 scale]` (either would add no protection while seeming
    /// to); [`OperandError::FloodingTooWide`] when the flood would leave
    /// less than two bits of precision (lower the goal or raise the scale);
    /// [`crate::Error::Entropy`].
    pub fn decrypt_flooded(
        &self,
        ciphertext: &Ciphertext,
        key: &SecretKey,
        flooding: &NoiseFlooding,
    ) -> Result<Plaintext> {
        let n = self.context.params().degree().get();
        match flooding.sigma {
            Some(sigma) if !(sigma.is_finite() && sigma >= 1.0) => {
                return Err(OperandError::InvalidFlooding {
                    reason: "an explicit width must be finite and at least one coefficient unit",
                }
                .into());
            }
            None if !(flooding.precision_bits.is_finite()
                && flooding.precision_bits > 0.0
                && flooding.precision_bits <= ciphertext.scale.log2()) =>
            {
                return Err(OperandError::InvalidFlooding {
                    reason: "precision_bits must be a number of bits above 0 and at most log2 of the scale",
                }
                .into());
            }
            _ => {}
        }
        let sigma = flooding.sigma(n, ciphertext.scale);
        // The flood's slot error is about σ·√N; keep at least two bits.
        if !sigma.is_finite() || sigma * (n as f64).sqrt() * 4.0 >= ciphertext.scale.0 {
            return Err(OperandError::FloodingTooWide {
                flood_log2: sigma.log2(),
                scale_log2: ciphertext.scale.log2(),
            }
            .into());
        }
        let mut plain = self.decrypt(ciphertext, key)?;
        let mut sampler = Sampler::from_os()?;
        let noise: Vec<f64> = (0..n).map(|_| sampler.gaussian_f64(sigma)).collect();
        let moduli = plain.poly()?.moduli().to_vec();
        let table = self.context.params().all_moduli();
        let mut words = vec![0u64; moduli.len() * n];
        for (limb, &index) in words.chunks_exact_mut(n).zip(&moduli) {
            let m = table.get(index).ok_or(crate::Error::EmptyBasis)?;
            for (w, &e) in limb.iter_mut().zip(&noise) {
                *w = m.reduce_f64(e).ok_or(OperandError::NonFiniteValue)?;
            }
        }
        let flood = RnsPoly::<Coeff>::from_words(
            plain.poly()?.backend(),
            &moduli,
            MemoryClass::Temporary,
            &words,
        )?
        .into_ntt()?;
        plain.poly_mut()?.add_assign(&flood)?;
        Ok(plain)
    }
}
