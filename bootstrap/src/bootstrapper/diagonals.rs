//! The DFT diagonals a [`Bootstrapper`] holds: their bytes, and
//! SlotToCoeff's, which absorb the input scale, cached by scale.

use std::sync::{Arc, PoisonError};

use hemem_ckks::encoding::{CompactPlaintext, Plaintext};

use super::Bootstrapper;
use crate::Result;
use crate::ckks_ops::CkksOps;
use crate::dft::EncodedDft;
use crate::hoisting::Hoisting;
use crate::linear_transform::{Diagonal, DiagonalStorage, LinearTransform};
use crate::schedule::INPUT_LEVEL;

/// SlotToCoeff's diagonals as the bootstrapper keeps them.
pub(super) type StcDft = EncodedDft<Plaintext, CompactPlaintext>;

/// Input scales whose SlotToCoeff diagonals a [`Bootstrapper`] keeps (least
/// recently used first out). Inputs usually arrive at one scale (a level's
/// default); a second covers alternating between two levels. Compact, one
/// entry is `2·slots` words per diagonal (about 83 MB at FGb, 0.25 GB
/// encoded); a scale beyond the cache is encoded again when it comes back.
pub const STC_CACHE_CAPACITY: usize = 2;

impl Bootstrapper {
    /// Bytes of the DFT diagonals held now, as stored (CoeffToSlot, and
    /// SlotToCoeff for each input scale in the cache).
    pub fn constant_bytes(&self) -> usize {
        self.diagonal_bytes(|d, _| match d {
            Diagonal::Encoded(p) => p.size_bytes(),
            Diagonal::Compact(c) => c.size_bytes(),
        })
    }

    /// Bytes the same diagonals would take encoded
    /// ([`DiagonalStorage::Encoded`]; over `Q_l ∪ P` in the transforms
    /// evaluated with double hoisting): [`Bootstrapper::constant_bytes`]
    /// for comparison.
    /// A diagonal that repeats a short period counts as kept periodic
    /// (`2·period` words a limb, [`hemem_ckks::encoding::is_short_period`]).
    pub fn constant_encoded_bytes(&self) -> usize {
        let params = self.context.params();
        let limb_bytes = 8 * params.degree().get() as u64;
        let special = params.p_moduli().len();
        self.diagonal_bytes(|d, hoisting| match d {
            Diagonal::Encoded(p) => p.size_bytes(),
            Diagonal::Compact(c) => LinearTransform::encoded_diagonal_bytes(
                c.level().0,
                hoisting,
                limb_bytes,
                special,
                c.period(),
            ) as usize,
        })
    }

    /// The sum of `bytes` over every diagonal held, each with its
    /// transform's hoisting.
    fn diagonal_bytes(
        &self,
        bytes: impl Fn(&Diagonal<Plaintext, CompactPlaintext>, Hoisting) -> usize,
    ) -> usize {
        let dft_bytes = |d: &StcDft| -> usize {
            d.transforms()
                .iter()
                .flat_map(|t| t.diagonals().map(|d| bytes(d, t.hoisting())))
                .sum()
        };
        dft_bytes(&self.cts)
            + self
                .stc
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .map(|(_, d)| dft_bytes(d))
                .sum::<usize>()
    }

    /// Input scales whose SlotToCoeff diagonals are held now, most recently
    /// used first (at most [`STC_CACHE_CAPACITY`]).
    pub fn cached_scales(&self) -> Vec<hemem_ckks::params::Scale> {
        self.stc
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|&(bits, _)| hemem_ckks::params::Scale(f64::from_bits(bits)))
            .collect()
    }

    /// Encodes SlotToCoeff's diagonals for inputs at `scale` ahead of the
    /// first bootstrap of such an input (which otherwise does it: the
    /// diagonals absorb the input scale exactly). The bootstrapper keeps
    /// them for the [`STC_CACHE_CAPACITY`] most recently used scales; on
    /// FGb one scale takes about 83 MB compact (0.25 GB encoded) of
    /// `BootstrapConstant` memory.
    ///
    /// # Errors
    /// `ScaleOutOfRange` for a scale outside `[1, Q_3)` (no input at
    /// bootstrapping's input level can carry it), reported as given; a
    /// scale the schedule cannot absorb; encoding errors.
    pub fn prepare_for_scale(&self, scale: hemem_ckks::params::Scale) -> Result<()> {
        self.stc_for(scale.get()).map(|_| ())
    }

    /// SlotToCoeff's diagonals for inputs at `scale`, from the cache (moved
    /// to its front) or encoded now (the first factor absorbs the input
    /// scale exactly) and cached, dropping the least recently used scale
    /// beyond [`STC_CACHE_CAPACITY`].
    pub(super) fn stc_for(&self, scale: f64) -> Result<Arc<StcDft>> {
        let key = scale.to_bits();
        {
            let mut cache = self.stc.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(i) = cache.iter().position(|(k, _)| *k == key) {
                let entry = cache.remove(i);
                let dft = Arc::clone(&entry.1);
                cache.insert(0, entry);
                return Ok(dft);
            }
            // The least recently used scale leaves before the new one is
            // encoded, so the cache never holds more than its capacity
            // (what `DiagonalStorage::Fit` reserved room for).
            cache.truncate(STC_CACHE_CAPACITY - 1);
        }
        let params = self.context.params();
        // The input's own scale is checked first, so that an error names
        // it rather than a diagonal scale derived from it.
        params.check_scale(
            hemem_ckks::params::Level(INPUT_LEVEL),
            hemem_ckks::params::Scale(scale),
        )?;
        let scales = self.schedule.stc_diagonal_scales(params, scale)?;
        let ops = CkksOps::new(&self.evaluator);
        let encoded = Arc::new(self.schedule.stc_dft()?.encode_hoisted(
            &ops,
            INPUT_LEVEL,
            &scales,
            self.schedule.log_bsgs_ratio,
            // Mixed keeps CoeffToSlot's factors encoded, not these.
            match self.storage {
                DiagonalStorage::Mixed { .. } | DiagonalStorage::Fit => DiagonalStorage::Compact,
                other => other,
            },
            self.hoisting,
        )?);
        let mut cache = self.stc.lock().unwrap_or_else(PoisonError::into_inner);
        // Another thread may have encoded the same scale meanwhile.
        cache.retain(|(k, _)| *k != key);
        cache.insert(0, (key, Arc::clone(&encoded)));
        cache.truncate(STC_CACHE_CAPACITY);
        Ok(encoded)
    }
}
