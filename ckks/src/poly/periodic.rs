//! [`PeriodicPoly`]: the NTT form of a polynomial in `X^gap`, kept as its
//! `N/gap` distinct values a limb.
//!
//! A message whose slots repeat with period `p` is, as CKKS packs it, a
//! polynomial in `X^{N/2p}` ([`crate::encoding::least_period`]); its NTT
//! form is `2p` values, each repeated `N/2p` times
//! ([`crate::ntt::forward_subring`]). Two of the three factors of each of
//! bootstrapping's DFTs have such diagonals (period 1024 and 32 at FGb), so
//! kept this way their encoded limbs are 32 and 1024 times smaller, and a
//! linear transform's inner sum reads them in place
//! ([`crate::backend::Backend::mul_sum_periodic`]) instead of expanding them.

use std::fmt;
use std::sync::Arc;

use hemem_memory::{Buffer, MemoryClass};

use crate::Result;
use crate::backend::{Backend, Device, PeriodicLimbs};

/// The NTT form of a polynomial in `X^{2^log_gap}` over some moduli: limb
/// `i` is the `N >> log_gap` words from word `i·(N >> log_gap)`, and its
/// value at `j` is word `j >> log_gap`.
pub struct PeriodicPoly {
    backend: Arc<dyn Backend>,
    buffer: Buffer,
    moduli: Arc<[usize]>,
    log_gap: u32,
}

impl fmt::Debug for PeriodicPoly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeriodicPoly")
            .field("device", &self.backend.device())
            .field("moduli", &self.moduli)
            .field("log_gap", &self.log_gap)
            .field("class", &self.buffer.class())
            .finish()
    }
}

impl PeriodicPoly {
    /// A polynomial whose contents are unspecified until written: limbs of
    /// `N >> log_gap` words over `moduli`.
    ///
    /// # Errors
    /// A modulus index the backend does not have; `2^log_gap ≥ N`;
    /// allocation errors.
    pub(crate) fn allocate(
        backend: &Arc<dyn Backend>,
        moduli: &[usize],
        log_gap: u32,
        class: MemoryClass,
    ) -> Result<Self> {
        crate::backend::check_moduli(moduli, backend.moduli().len())?;
        let points = backend.degree() >> log_gap.min(usize::BITS - 1);
        let buffer = backend
            .allocator()
            .allocate(class, (moduli.len() * points).max(1) * 8)?;
        let poly = Self {
            backend: Arc::clone(backend),
            buffer,
            moduli: moduli.into(),
            log_gap,
        };
        poly.limbs()?;
        Ok(poly)
    }

    /// The global modulus index of each limb.
    pub fn moduli(&self) -> &[usize] {
        &self.moduli
    }

    /// Number of limbs.
    pub fn limb_count(&self) -> usize {
        self.moduli.len()
    }

    /// `log2` of the repetition: each limb holds `N >> log_gap` values.
    pub fn log_gap(&self) -> u32 {
        self.log_gap
    }

    /// Where the polynomial lives.
    pub fn device(&self) -> Device {
        self.backend.device()
    }

    /// The backend that holds it.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The underlying buffer.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// The underlying buffer, mutably (for the backend to fill).
    pub(crate) fn buffer_mut(&mut self) -> &mut Buffer {
        &mut self.buffer
    }

    /// A view of all limbs, checked.
    ///
    /// # Errors
    /// [`crate::Error::LengthMismatch`] (never for a polynomial made here).
    pub fn limbs(&self) -> Result<PeriodicLimbs<'_>> {
        PeriodicLimbs::new(
            self.backend.as_ref(),
            &self.buffer,
            &self.moduli,
            self.log_gap,
        )
    }

    /// Declares the polynomial finished (see [`crate::poly::RnsPoly::seal`]).
    ///
    /// # Errors
    /// Driver errors.
    pub fn seal(&self) -> Result<()> {
        Ok(self.backend.allocator().seal(&self.buffer)?)
    }

    /// The stored words (`N >> log_gap` a limb), downloaded.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_words(&self) -> Result<Vec<u64>> {
        let mut words = vec![0u64; self.buffer.words()];
        self.backend
            .allocator()
            .download(&self.buffer, 0, &mut words)?;
        words.truncate(self.moduli.len() * (self.backend.degree() >> self.log_gap));
        Ok(words)
    }

    /// Every limb's `N` values, each stored word repeated `2^log_gap`
    /// times: the words of the full NTT form, downloaded.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_full_words(&self) -> Result<Vec<u64>> {
        let gap = 1usize << self.log_gap;
        Ok(self
            .to_words()?
            .into_iter()
            .flat_map(|w| std::iter::repeat_n(w, gap))
            .collect())
    }

    /// A copy in a buffer of `class` on `backend` (the same or another).
    ///
    /// # Errors
    /// Allocation and transfer errors.
    pub fn copy_to(&self, backend: &Arc<dyn Backend>, class: MemoryClass) -> Result<Self> {
        let words = self.to_words()?;
        let mut copy = Self::allocate(backend, &self.moduli, self.log_gap, class)?;
        backend.allocator().upload(&mut copy.buffer, 0, &words)?;
        if class.is_read_only() {
            copy.seal()?;
        }
        Ok(copy)
    }
}
