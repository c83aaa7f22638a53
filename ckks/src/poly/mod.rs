//! RNS polynomials in `Z_Q[X]/(X^N + 1)` with their representation as a type:
//! [`RnsPoly<Coeff>`] holds coefficients, [`RnsPoly<Ntt>`] evaluations (the
//! NTT domain, bit-reversed). An operation exists only on the form where it
//! is valid — a product of coefficient-form polynomials does not compile:
//!
//! ```compile_fail
//! # use hemem_ckks::poly::{Coeff, RnsPoly};
//! fn product(a: &mut RnsPoly<Coeff>, b: &RnsPoly<Coeff>) {
//!     a.mul_assign(b); // only RnsPoly<Ntt> multiplies
//! }
//! ```
//!
//! Every polynomial lives on one backend, in a buffer of a given memory
//! class; its limbs are reduced modulo the primes with the global indices
//! [`RnsPoly::moduli`].

mod ops;
mod periodic;

pub use periodic::PeriodicPoly;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use hemem_memory::{Buffer, MemoryClass};
use rayon::prelude::*;

use crate::backend::{Backend, BinaryOp, Device, Limbs, LimbsMut};
use crate::zq::Modulus;
use crate::{OperandError, Result};

mod private {
    pub trait Sealed {}
    impl Sealed for super::Coeff {}
    impl Sealed for super::Ntt {}
}

/// The representation of a polynomial: [`Coeff`] or [`Ntt`].
pub trait Representation: private::Sealed + Send + Sync + 'static {
    /// `"coefficient"` or `"ntt"`.
    const NAME: &'static str;
}

/// Coefficient representation (natural order).
#[derive(Clone, Copy, Debug)]
pub struct Coeff;

/// Evaluation representation: the negacyclic NTT, bit-reversed order.
#[derive(Clone, Copy, Debug)]
pub struct Ntt;

impl Representation for Coeff {
    const NAME: &'static str = "coefficient";
}

impl Representation for Ntt {
    const NAME: &'static str = "ntt";
}

/// An RNS polynomial on a backend.
pub struct RnsPoly<R: Representation> {
    backend: Arc<dyn Backend>,
    buffer: Buffer,
    moduli: Arc<[usize]>,
    _repr: PhantomData<R>,
}

impl<R: Representation> fmt::Debug for RnsPoly<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RnsPoly")
            .field("representation", &R::NAME)
            .field("device", &self.backend.device())
            .field("moduli", &self.moduli)
            .field("class", &self.buffer.class())
            .finish()
    }
}

impl<R: Representation> RnsPoly<R> {
    /// A polynomial whose contents are unspecified until written (callers
    /// overwrite every limb).
    pub(crate) fn allocate(
        backend: &Arc<dyn Backend>,
        moduli: &[usize],
        class: MemoryClass,
        sensitive: bool,
    ) -> Result<Self> {
        // Every view of the polynomial names these moduli: checked once here.
        crate::backend::check_moduli(moduli, backend.moduli().len())?;
        let buffer = backend.allocate(class, moduli.len(), sensitive)?;
        Ok(Self {
            backend: Arc::clone(backend),
            buffer,
            moduli: moduli.into(),
            _repr: PhantomData,
        })
    }

    /// The zero polynomial over `moduli` (global indices).
    ///
    /// # Errors
    /// Allocation errors.
    pub fn zero(backend: &Arc<dyn Backend>, moduli: &[usize], class: MemoryClass) -> Result<Self> {
        let mut p = Self::allocate(backend, moduli, class, false)?;
        let zeros = vec![0u64; moduli.len()];
        backend.scalar_assign(BinaryOp::Mul, p.limbs_mut()?, &zeros)?;
        Ok(p)
    }

    /// A polynomial from host words, limb after limb (each reduced modulo its
    /// limb's prime).
    ///
    /// # Errors
    /// Allocation errors, or a word count other than `limbs × N`.
    pub fn from_words(
        backend: &Arc<dyn Backend>,
        moduli: &[usize],
        class: MemoryClass,
        words: &[u64],
    ) -> Result<Self> {
        Self::from_words_with(backend, moduli, class, words, false)
    }

    /// As [`RnsPoly::from_words`], for secret-key material (zeroed on release).
    ///
    /// # Errors
    /// As [`RnsPoly::from_words`].
    pub fn from_words_sensitive(
        backend: &Arc<dyn Backend>,
        moduli: &[usize],
        class: MemoryClass,
        words: &[u64],
    ) -> Result<Self> {
        Self::from_words_with(backend, moduli, class, words, true)
    }

    /// A polynomial whose limbs `fill(limb, modulus, words)` writes (every
    /// word): in place when the polynomial lives on the host, through one
    /// host staging copy and an upload otherwise. `fill` runs in parallel
    /// over limbs.
    ///
    /// # Errors
    /// Allocation errors; an unknown modulus index.
    pub fn from_limbs_with<F>(
        backend: &Arc<dyn Backend>,
        moduli: &[usize],
        class: MemoryClass,
        sensitive: bool,
        fill: F,
    ) -> Result<Self>
    where
        F: Fn(usize, &Modulus, &mut [u64]) + Sync,
    {
        let n = backend.degree();
        let table = backend.moduli();
        let limb_moduli = moduli
            .iter()
            .map(|&i| {
                table.get(i).copied().ok_or(crate::Error::LengthMismatch {
                    expected: table.len(),
                    actual: i + 1,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut p = Self::allocate(backend, moduli, class, sensitive)?;
        let run = |words: &mut [u64]| {
            words
                .par_chunks_exact_mut(n)
                .zip(&limb_moduli)
                .enumerate()
                .for_each(|(i, (limb, m))| fill(i, m, limb));
        };
        if let Ok(words) = p.buffer.host_words_mut() {
            run(words);
        } else {
            let mut words = zeroize::Zeroizing::new(vec![0u64; moduli.len() * n]);
            run(&mut words);
            backend.write(p.limbs_mut()?, &words)?;
        }
        Ok(p)
    }

    fn from_words_with(
        backend: &Arc<dyn Backend>,
        moduli: &[usize],
        class: MemoryClass,
        words: &[u64],
        sensitive: bool,
    ) -> Result<Self> {
        let mut p = Self::allocate(backend, moduli, class, sensitive)?;
        backend.write(p.limbs_mut()?, words)?;
        Ok(p)
    }

    /// The global modulus index of each limb.
    pub fn moduli(&self) -> &[usize] {
        &self.moduli
    }

    /// Number of limbs.
    pub fn limb_count(&self) -> usize {
        self.moduli.len()
    }

    /// The backend the polynomial lives on.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Where the polynomial lives.
    pub fn device(&self) -> Device {
        self.backend.device()
    }

    /// The buffer's memory class.
    pub fn class(&self) -> MemoryClass {
        self.buffer.class()
    }

    /// The underlying buffer.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// Whether the polynomial is secret-key material (or computed from it):
    /// its memory is zeroed before it is reused or released, and results
    /// computed from it are sensitive too.
    pub fn is_sensitive(&self) -> bool {
        self.buffer.is_sensitive()
    }

    /// Releases the polynomial now, zeroing it first when it is sensitive,
    /// and returns what the zeroing met — which dropping it cannot (a
    /// failure in a drop is returned by the allocator's next call instead,
    /// see [`hemem_memory::Allocator::check`]). Key generation and
    /// secret-key encryption release their secret temporaries this way.
    ///
    /// # Errors
    /// [`hemem_memory::Error::ZeroingFailed`] (as [`crate::Error::Memory`]).
    pub fn release(self) -> Result<()> {
        let Self {
            backend, buffer, ..
        } = self;
        Ok(backend.allocator().release(buffer)?)
    }

    /// Declares the polynomial finished: it will not be written again (a
    /// switching key half, a diagonal). Under the `planned` memory policy
    /// its device copy is then dropped without a write-back when it leaves
    /// the device.
    ///
    /// # Errors
    /// Driver errors (a device copy newer than the master is copied back).
    pub fn seal(&self) -> Result<()> {
        Ok(self.backend.allocator().seal(&self.buffer)?)
    }

    /// The underlying buffer, mutably (for views over chosen limbs).
    pub fn buffer_mut(&mut self) -> &mut Buffer {
        &mut self.buffer
    }

    /// A view of all limbs.
    ///
    /// # Errors
    /// More than 256 limbs.
    pub fn limbs(&self) -> Result<Limbs<'_>> {
        Limbs::whole(&self.buffer, &self.moduli)
    }

    /// A mutable view of all limbs.
    ///
    /// # Errors
    /// More than 256 limbs.
    pub fn limbs_mut(&mut self) -> Result<LimbsMut<'_>> {
        LimbsMut::whole(&mut self.buffer, &self.moduli)
    }

    /// A view of the first `count` limbs.
    ///
    /// # Errors
    /// `count` beyond the limb count.
    pub fn prefix(&self, count: usize) -> Result<Limbs<'_>> {
        let moduli = self
            .moduli
            .get(..count)
            .ok_or(crate::Error::LengthMismatch {
                expected: self.moduli.len(),
                actual: count,
            })?;
        Ok(Limbs {
            buffer: &self.buffer,
            positions: crate::backend::contiguous(0, count)?,
            moduli,
        })
    }

    /// A mutable view of the first `count` limbs.
    ///
    /// # Errors
    /// `count` beyond the limb count.
    pub fn prefix_mut(&mut self, count: usize) -> Result<LimbsMut<'_>> {
        let moduli = self
            .moduli
            .get(..count)
            .ok_or(crate::Error::LengthMismatch {
                expected: self.moduli.len(),
                actual: count,
            })?;
        Ok(LimbsMut {
            buffer: &mut self.buffer,
            positions: crate::backend::contiguous(0, count)?,
            moduli,
        })
    }

    /// A view of the limbs at `positions` (with their moduli).
    ///
    /// # Errors
    /// A position beyond the polynomial.
    pub fn select<'a>(
        &'a self,
        positions: &'a [usize],
        moduli: &'a mut Vec<usize>,
    ) -> Result<Limbs<'a>> {
        moduli.clear();
        for &p in positions {
            moduli.push(*self.moduli.get(p).ok_or(crate::Error::LengthMismatch {
                expected: self.moduli.len(),
                actual: p + 1,
            })?);
        }
        Ok(Limbs {
            buffer: &self.buffer,
            positions,
            moduli,
        })
    }

    /// The limbs as host words (downloads from a device; synchronises).
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_words(&self) -> Result<Vec<u64>> {
        let mut out = vec![0u64; self.moduli.len() * self.backend.degree()];
        self.backend.read(self.limbs()?, &mut out)?;
        Ok(out)
    }

    /// A copy in a buffer of `class`.
    ///
    /// # Errors
    /// Allocation errors.
    pub fn clone_as(&self, class: MemoryClass) -> Result<Self> {
        let mut p = Self::allocate(
            &self.backend,
            &self.moduli,
            class,
            self.buffer.is_sensitive(),
        )?;
        self.backend.copy(self.limbs()?, p.limbs_mut()?)?;
        Ok(p)
    }

    /// A copy in a buffer of the same class.
    ///
    /// # Errors
    /// Allocation errors.
    pub fn try_clone(&self) -> Result<Self> {
        self.clone_as(self.class())
    }

    /// A copy holding only the first `count` limbs (dropping the top primes).
    ///
    /// # Errors
    /// `count` larger than the limb count, or allocation errors.
    pub fn truncated(&self, count: usize, class: MemoryClass) -> Result<Self> {
        let src = self.prefix(count)?;
        let mut p = Self::allocate(&self.backend, src.moduli, class, self.buffer.is_sensitive())?;
        self.backend.copy(src, p.limbs_mut()?)?;
        Ok(p)
    }

    /// The same polynomial on another backend (host ↔ device transfer).
    ///
    /// # Errors
    /// Transfer or allocation errors.
    pub fn to_backend(&self, backend: &Arc<dyn Backend>) -> Result<Self> {
        if Arc::ptr_eq(&self.backend, backend) {
            return self.try_clone();
        }
        // Host words of a sensitive polynomial are zeroed when dropped.
        let words = zeroize::Zeroizing::new(self.to_words()?);
        Self::from_words_with(
            backend,
            &self.moduli,
            self.class(),
            &words,
            self.buffer.is_sensitive(),
        )
    }

    /// Checks that `other` lives on the same backend and has the same moduli.
    pub(crate) fn check_compatible<S: Representation>(&self, other: &RnsPoly<S>) -> Result<()> {
        if !Arc::ptr_eq(&self.backend, &other.backend) {
            return Err(OperandError::DeviceMismatch {
                left: self.device(),
                right: other.device(),
            }
            .into());
        }
        if self.moduli != other.moduli {
            return Err(crate::Error::LengthMismatch {
                expected: self.moduli.len(),
                actual: other.moduli.len(),
            });
        }
        Ok(())
    }

    pub(crate) fn retag<S: Representation>(self) -> RnsPoly<S> {
        RnsPoly {
            backend: self.backend,
            buffer: self.buffer,
            moduli: self.moduli,
            _repr: PhantomData,
        }
    }
}

impl RnsPoly<Coeff> {
    /// Transforms to the NTT domain, consuming the coefficient form.
    ///
    /// # Errors
    /// Backend errors.
    pub fn into_ntt(mut self) -> Result<RnsPoly<Ntt>> {
        let backend = Arc::clone(&self.backend);
        backend.ntt_forward(self.limbs_mut()?)?;
        Ok(self.retag())
    }
}

impl RnsPoly<Ntt> {
    /// The coefficient form in a new buffer of `class`, leaving `self`
    /// unchanged (one out-of-place transform, no copy on the GPU).
    ///
    /// # Errors
    /// Allocation and backend errors.
    pub fn to_coeff(&self, class: MemoryClass) -> Result<RnsPoly<Coeff>> {
        let mut out = RnsPoly::<Coeff>::allocate(
            &self.backend,
            &self.moduli,
            class,
            self.buffer.is_sensitive(),
        )?;
        self.backend
            .ntt_inverse_into(self.limbs()?, out.limbs_mut()?)?;
        Ok(out)
    }

    /// Transforms to coefficients, consuming the NTT form.
    ///
    /// # Errors
    /// Backend errors.
    pub fn into_coeff(mut self) -> Result<RnsPoly<Coeff>> {
        let backend = Arc::clone(&self.backend);
        backend.ntt_inverse(self.limbs_mut()?)?;
        Ok(self.retag())
    }
}

impl RnsPoly<Coeff> {
    /// The polynomial with small signed integer coefficients `coefficients`
    /// (length N), reduced modulo each prime of `moduli`. Secret material
    /// (`sensitive`) is zeroed when released, on host and device.
    ///
    /// # Errors
    /// A length other than N; allocation errors.
    pub fn from_signed(
        backend: &Arc<dyn Backend>,
        moduli: &[usize],
        class: MemoryClass,
        coefficients: &[i64],
        sensitive: bool,
    ) -> Result<Self> {
        let n = backend.degree();
        if coefficients.len() != n {
            return Err(crate::Error::LengthMismatch {
                expected: n,
                actual: coefficients.len(),
            });
        }
        Self::from_limbs_with(backend, moduli, class, sensitive, |_, m, limb| {
            let q = m.value();
            for (w, &c) in limb.iter_mut().zip(coefficients) {
                // Small coefficients (|c| < q) need no division.
                *w = if c >= 0 && (c as u64) < q {
                    c as u64
                } else if c < 0 && c.unsigned_abs() < q {
                    q - c.unsigned_abs()
                } else {
                    m.reduce_i64(c)
                };
            }
        })
    }
}

impl RnsPoly<Ntt> {
    /// A uniformly random polynomial over `moduli`, drawn on the host limb
    /// by limb directly in the NTT domain (the transform is a bijection, so
    /// this is uniform in `R_Q`).
    ///
    /// # Errors
    /// Allocation errors.
    pub fn uniform(
        backend: &Arc<dyn Backend>,
        moduli: &[usize],
        class: MemoryClass,
        sampler: &mut crate::sampling::Sampler,
    ) -> Result<Self> {
        let n = backend.degree();
        let table = backend.moduli();
        let mut words = vec![0u64; moduli.len() * n];
        for (limb, &index) in words.chunks_exact_mut(n).zip(moduli) {
            let m = table.get(index).ok_or(crate::Error::LengthMismatch {
                expected: table.len(),
                actual: index + 1,
            })?;
            sampler.fill_uniform(m.value(), limb);
        }
        Self::from_words(backend, moduli, class, &words)
    }
}
