//! Single launches on raw addresses and limb maps: forward and inverse
//! NTTs (with their epilogues), copies and the expansion of compact
//! plaintexts. The callers check the views and hold the residency guards.

use hemem_gpu_kernels::launch::ckks::ntt::{ForwardEpilogue, ForwardSource};
use hemem_gpu_kernels::launch::ckks::{self as launch, LimbMap};
use hemem_memory::{Buffer, StreamId};

use super::GpuBackend;
use super::args::{address, first, same_length};
use crate::Result;

impl GpuBackend {
    /// Forward NTT of `source` into `dst`'s limbs (one part per buffer),
    /// with the given last-phase epilogue.
    pub(super) fn ntt_forward_raw(
        &self,
        dst: (&[u64], &LimbMap),
        source: ForwardSource<'_>,
        epilogue: ForwardEpilogue<'_>,
    ) -> Result<()> {
        // SAFETY: every address holds its map's limbs (checked by the
        // callers' views or fresh scratch; compact sources at least N/gap
        // words, checked by `compact_words`), allocated on the compute stream
        // where every launch of this backend runs; the source limbs are the
        // destination's own or lie in another buffer (an addend, read
        // through an automorphism or not, is a shared borrow where the
        // destinations are mutable ones: always another buffer), and the
        // parts' destinations are distinct buffers or disjoint limbs of
        // scratch;
        // the tables cover every modulus index (they are built for the
        // whole global table, and `limb_map` checks each index against it)
        // and the conversion tables match their
        // sources and targets (built from the same lists).
        unsafe {
            launch::ntt::forward_async(
                &self.kernels,
                StreamId::Compute,
                dst,
                source,
                self.consts()?,
                address(&self.twiddles)?,
                self.ntt_geometry(),
                epilogue,
            )
        }?;
        Ok(())
    }

    /// Inverse NTT of `src`'s limbs into `dst`'s (the same for in place),
    /// one part per buffer; with `y_scale`, a conversion's `y_i` instead of
    /// the coefficients.
    pub(super) fn ntt_inverse_raw(
        &self,
        dst: (&[u64], &LimbMap),
        src: (&[u64], &LimbMap),
        y_scale: Option<u64>,
    ) -> Result<()> {
        // SAFETY: as `ntt_forward_raw`; `y_scale` holds a pair per limb.
        unsafe {
            launch::ntt::inverse_async(
                &self.kernels,
                StreamId::Compute,
                dst,
                src,
                self.consts()?,
                address(&self.twiddles)?,
                address(&self.n_inv)?,
                y_scale,
                self.ntt_geometry(),
            )
        }?;
        Ok(())
    }

    pub(super) fn ntt(&self, buffer: u64, map: &LimbMap, forward: bool) -> Result<()> {
        if forward {
            self.ntt_forward_raw(
                (&[buffer], map),
                ForwardSource::Limbs {
                    src: &[buffer],
                    map,
                },
                ForwardEpilogue::Store,
            )
        } else {
            self.ntt_inverse_raw((&[buffer], map), (&[buffer], map), None)
        }
    }

    pub(super) fn copy_raw(&self, dst: (u64, &LimbMap), src: (u64, &LimbMap)) -> Result<()> {
        // SAFETY: both addresses hold their maps' limbs on the compute stream;
        // callers pass distinct buffers or disjoint limbs.
        unsafe { launch::arith::copy_async(&self.kernels, StreamId::Compute, dst, src, self.n()) }?;
        Ok(())
    }

    /// The device addresses of `compact`'s words (each checked to hold
    /// N/gap of them), one per destination in `dst`.
    pub(super) fn compact_sources(
        &self,
        dst: &[u64],
        compact: &[&Buffer],
        gap: usize,
    ) -> Result<[u64; launch::encode::MAX_EXPAND_PARTS]> {
        let mut sources = [0u64; launch::encode::MAX_EXPAND_PARTS];
        for (slot, c) in sources.iter_mut().zip(compact) {
            crate::backend::compact_words(c, gap, self.degree)?;
            *slot = address(c)?;
        }
        same_length(dst.len(), compact.len())?;
        Ok(sources)
    }

    /// Queues the expansion of `compact[z]`, the coefficients of a
    /// polynomial in `X^gap`, into the limbs `map` of the buffer at
    /// `dst[z]`, NTT form, by a transform of `N/gap` points each
    /// (`expand_periodic`; `N/gap` at most
    /// [`launch::encode::MAX_PERIODIC_POINTS`]): with `whole`, limbs of N
    /// words, else the periodic form (limbs of `N/gap` words, the values
    /// unrepeated); the caller holds the residency guard of every buffer.
    pub(super) fn expand_periodic_raw(
        &self,
        dst: &[u64],
        compact: &[&Buffer],
        gap: usize,
        map: &LimbMap,
        whole: bool,
    ) -> Result<()> {
        let sources = self.compact_sources(dst, compact, gap)?;
        let log_points = (self.degree / gap).trailing_zeros();
        // SAFETY: as `expand_raw`, with N/gap words per source and the
        // destinations' limbs of N words (`whole`) or N/gap (checked by
        // `periodic_shape`); the twiddle table covers every modulus index
        // (built for the whole table).
        unsafe {
            launch::encode::expand_periodic_async(
                &self.kernels,
                StreamId::Compute,
                dst,
                first(&sources, compact.len())?,
                map,
                self.consts()?,
                address(&self.twiddles)?,
                self.n(),
                log_points,
                whole,
            )
        }?;
        Ok(())
    }

    /// Queues the expansion of `compact[z]` into the limbs `map` of the
    /// buffer at `dst[z]` (coefficient form); the caller holds the
    /// residency guard of every buffer.
    pub(super) fn expand_raw(
        &self,
        dst: &[u64],
        compact: &[&Buffer],
        gap: usize,
        map: &LimbMap,
    ) -> Result<()> {
        let sources = self.compact_sources(dst, compact, gap)?;
        // SAFETY: each destination address holds `map`'s limbs (a checked
        // view) and each source at least N/gap words (checked above), all
        // on the compute stream; destinations are distinct buffers (mutable
        // views) and never a source (shared borrows); the constants cover
        // every modulus index.
        unsafe {
            launch::encode::expand_compact_async(
                &self.kernels,
                StreamId::Compute,
                dst,
                first(&sources, compact.len())?,
                map,
                self.consts()?,
                self.n(),
                gap.trailing_zeros(),
            )
        }?;
        Ok(())
    }
}
