//! Device tables built on first use and cached by the moduli they serve:
//! base conversions, rescaling's and decomposition's scale pairs.

use std::sync::{Arc, PoisonError};

use hemem_gpu_kernels::launch::ckks as launch;
use hemem_memory::Buffer;

use super::GpuBackend;
use super::tables::{DeviceConversion, conversion, scale_pairs, upload_constant, y_scale_words};
use crate::{Error, Result};

/// Two lists of moduli as one cache key (`first`, a separator, `second`),
/// built on the stack so a cache hit allocates nothing.
struct PairKey {
    words: [usize; 2 * launch::MAX_LIMBS + 1],
    len: usize,
}

impl PairKey {
    fn new(first: &[usize], second: &[usize]) -> Result<Self> {
        let len = first.len() + second.len() + 1;
        let mut words = [0usize; 2 * launch::MAX_LIMBS + 1];
        let slots = words.get_mut(..len).ok_or(Error::LengthMismatch {
            expected: 2 * launch::MAX_LIMBS + 1,
            actual: len,
        })?;
        for (slot, &m) in slots
            .iter_mut()
            .zip(first.iter().chain(&[usize::MAX]).chain(second))
        {
            *slot = m;
        }
        Ok(Self { words, len })
    }

    fn as_slice(&self) -> &[usize] {
        self.words.get(..self.len).unwrap_or(&[])
    }
}

impl GpuBackend {
    pub(super) fn conversion(&self, from: &[usize], to: &[usize]) -> Result<Arc<DeviceConversion>> {
        let key = PairKey::new(from, to)?;
        if let Some(t) = self
            .conversions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key.as_slice())
        {
            return Ok(Arc::clone(t));
        }
        let from_m = from
            .iter()
            .map(|&i| self.modulus(i))
            .collect::<Result<Vec<_>>>()?;
        let to_m = to
            .iter()
            .map(|&i| self.modulus(i))
            .collect::<Result<Vec<_>>>()?;
        let tables = Arc::new(conversion(&self.allocator, self.degree, &from_m, &to_m)?);
        self.conversions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.as_slice().to_vec(), Arc::clone(&tables));
        Ok(tables)
    }

    /// The device table of `(q_last^{-1} mod q_i, shoup)` for each kept
    /// modulus, built once per `(kept, last)`.
    pub(super) fn rescale_scale(&self, kept: &[usize], last: usize) -> Result<Arc<Buffer>> {
        let key = PairKey::new(kept, &[last])?;
        if let Some(t) = self
            .rescale_scales
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key.as_slice())
        {
            return Ok(Arc::clone(t));
        }
        let q_last = self.modulus(last)?;
        let moduli = kept
            .iter()
            .map(|&i| self.modulus(i))
            .collect::<Result<Vec<_>>>()?;
        let inverses = moduli
            .iter()
            .map(|m| {
                m.inv(q_last.value()).ok_or(Error::NotCoprime {
                    first: m.value(),
                    second: q_last.value(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let table = Arc::new(upload_constant(
            &self.allocator,
            &scale_pairs(&moduli, &inverses),
        )?);
        self.rescale_scales
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.as_slice().to_vec(), Arc::clone(&table));
        Ok(table)
    }

    /// The per-limb `(N^{-1}·q̂_i^{-1}, shoup)` pairs of a decomposition of
    /// `moduli` into digits of `alpha` limbs, built once per pair.
    pub(super) fn decompose_scale(&self, moduli: &[usize], alpha: usize) -> Result<Arc<Buffer>> {
        let key = PairKey::new(moduli, &[alpha])?;
        if let Some(t) = self
            .decompose_scales
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key.as_slice())
        {
            return Ok(Arc::clone(t));
        }
        let mut words = Vec::with_capacity(2 * moduli.len());
        for digit in moduli.chunks(alpha.max(1)) {
            let m = digit
                .iter()
                .map(|&i| self.modulus(i))
                .collect::<Result<Vec<_>>>()?;
            words.extend(y_scale_words(self.degree, &m)?);
        }
        let table = Arc::new(upload_constant(&self.allocator, &words)?);
        self.decompose_scales
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.as_slice().to_vec(), Arc::clone(&table));
        Ok(table)
    }
}
