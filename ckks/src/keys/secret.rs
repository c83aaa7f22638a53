//! [`SecretKey`].

use std::fmt;

use hemem_memory::MemoryClass;
use zeroize::Zeroizing;

use crate::Result;
use crate::context::Context;
use crate::poly::{Coeff, Ntt, RnsPoly};

/// A CKKS secret key: a ternary polynomial with exactly `h` nonzero
/// coefficients (the preset's Hamming weight), kept as coefficients and in
/// NTT form over every modulus (Q and P).
///
/// Its memory is sensitive: zeroed when it is dropped, on the host and on a
/// device (and so is every buffer computed from it: see
/// [`crate::poly::RnsPoly::is_sensitive`]); [`SecretKey::release`] zeroes it
/// and reports a failure, which a drop cannot. Its `Debug` output never
/// shows key material.
pub struct SecretKey {
    pub(crate) context: Context,
    pub(crate) coefficients: Zeroizing<Vec<i64>>,
    pub(crate) poly: RnsPoly<Ntt>,
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretKey")
            .field("hamming_weight", &self.hamming_weight())
            .field("device", &self.poly.device())
            .finish_non_exhaustive()
    }
}

impl SecretKey {
    /// A key from ternary coefficients, transformed on the context's device.
    pub(crate) fn from_coefficients(
        context: &Context,
        coefficients: Zeroizing<Vec<i64>>,
    ) -> Result<Self> {
        let params = context.params();
        let moduli: Vec<usize> = (0..params.q_moduli().len() + params.p_moduli().len()).collect();
        let poly = RnsPoly::<Coeff>::from_signed(
            context.backend(),
            &moduli,
            MemoryClass::EvaluationKey,
            &coefficients,
            true,
        )?
        .into_ntt()?;
        Ok(Self {
            context: context.clone(),
            coefficients,
            poly,
        })
    }

    /// The number of nonzero coefficients.
    pub fn hamming_weight(&self) -> usize {
        self.coefficients.iter().filter(|&&c| c != 0).count()
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The key in NTT form over all moduli (global indices).
    pub fn poly(&self) -> &RnsPoly<Ntt> {
        &self.poly
    }

    /// The ternary coefficients (secret: handle with care).
    pub fn coefficients(&self) -> &[i64] {
        &self.coefficients
    }

    /// Destroys the key now: its coefficients and its memory on the host or
    /// the device are zeroed, and a failure to zero the device memory is
    /// returned here (a dropped key's failure is returned by the allocator's
    /// next call instead, see [`hemem_memory::Allocator::check`]).
    ///
    /// # Errors
    /// [`hemem_memory::Error::ZeroingFailed`] (as [`crate::Error::Memory`]).
    pub fn release(self) -> Result<()> {
        let Self {
            coefficients, poly, ..
        } = self;
        drop(coefficients);
        poly.release()
    }
}
