//! [`Limbs`] and [`LimbsMut`]: which limbs of a buffer an operation touches,
//! and under which moduli.
//!
//! Outside this crate a view is made only by a checked constructor
//! ([`Limbs::new`], [`Limbs::with_positions`] and their [`LimbsMut`]
//! twins), which checks its positions against the buffer at the backend's
//! degree and its modulus indices against the backend's table: kernels
//! index their constant and twiddle tables by those indices. Every backend
//! operation checks its views again before any kernel runs.

use hemem_memory::Buffer;

use super::Backend;
use crate::ntt::GaloisElement;
use crate::{Error, Result};

/// `0, 1, 2, …`: positions for contiguous views without allocating.
const IOTA: [usize; 256] = {
    let mut a = [0usize; 256];
    let mut i = 0;
    while i < 256 {
        #[expect(clippy::indexing_slicing, reason = "i < 256 is the loop bound")]
        {
            a[i] = i;
        }
        i += 1;
    }
    a
};

/// Positions `start .. start + count` (at most 256 limbs).
///
/// # Errors
/// [`Error::LengthMismatch`] beyond 256 limbs.
pub(crate) fn contiguous(start: usize, count: usize) -> Result<&'static [usize]> {
    IOTA.get(start..start + count).ok_or(Error::LengthMismatch {
        expected: IOTA.len(),
        actual: start + count,
    })
}

/// A read-only view: limb `i` of the view is limb `positions[i]` of `buffer`
/// (N words each), reduced modulo the prime with global index `moduli[i]`.
#[derive(Clone, Copy, Debug)]
pub struct Limbs<'a> {
    /// The buffer.
    pub(crate) buffer: &'a Buffer,
    /// Limb positions in the buffer.
    pub(crate) positions: &'a [usize],
    /// Global modulus index of each limb.
    pub(crate) moduli: &'a [usize],
}

/// A mutable view; positions are distinct.
#[derive(Debug)]
pub struct LimbsMut<'a> {
    /// The buffer.
    pub(crate) buffer: &'a mut Buffer,
    /// Limb positions in the buffer.
    pub(crate) positions: &'a [usize],
    /// Global modulus index of each limb.
    pub(crate) moduli: &'a [usize],
}

/// What a ModDown adds to its result, the addition that ends a key switch:
/// `limbs` (over the ModDown's output moduli, NTT form), or, for a rotation,
/// their automorphism `σ_g(limbs)`. The GPU's ModDown reads a rotation's
/// `c0` through the permutation as it adds it, where rotating `c0` first
/// took a launch, a write and a read of the polynomial (the same values,
/// read in another order: the same sum).
#[derive(Clone, Copy, Debug)]
pub struct Addend<'a> {
    /// The limbs added.
    pub(crate) limbs: Limbs<'a>,
    /// The automorphism they are read through, if any.
    pub(crate) galois: Option<GaloisElement>,
}

impl<'a> Addend<'a> {
    /// `limbs`, added as they are.
    pub fn new(limbs: Limbs<'a>) -> Self {
        Self {
            limbs,
            galois: None,
        }
    }

    /// `σ_g(limbs)`: `limbs` read through the automorphism `g`.
    pub fn rotated(limbs: Limbs<'a>, g: GaloisElement) -> Self {
        Self {
            limbs,
            galois: Some(g),
        }
    }

    /// `limbs` read through `galois` where given, as they are otherwise.
    pub fn through(limbs: Limbs<'a>, galois: Option<GaloisElement>) -> Self {
        Self { limbs, galois }
    }

    /// The limbs added.
    pub fn limbs(&self) -> Limbs<'a> {
        self.limbs
    }

    /// The automorphism the limbs are read through, if any.
    pub fn galois(&self) -> Option<GaloisElement> {
        self.galois
    }
}

impl<'a> Limbs<'a> {
    /// A view of `moduli.len()` consecutive limbs starting at limb 0, for
    /// use with `backend`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] beyond 256 limbs, for limbs beyond the
    /// buffer at the backend's degree, or for a modulus index the backend
    /// does not have.
    pub fn new<B: Backend + ?Sized>(
        backend: &B,
        buffer: &'a Buffer,
        moduli: &'a [usize],
    ) -> Result<Self> {
        Self::with_positions(backend, buffer, contiguous(0, moduli.len())?, moduli)
    }

    /// A view of the limbs at `positions` of `buffer`, limb `i` under the
    /// modulus with global index `moduli[i]`, for use with `backend`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] for lists of different lengths, a position
    /// beyond the buffer at the backend's degree, or a modulus index the
    /// backend does not have.
    pub fn with_positions<B: Backend + ?Sized>(
        backend: &B,
        buffer: &'a Buffer,
        positions: &'a [usize],
        moduli: &'a [usize],
    ) -> Result<Self> {
        let view = Self {
            buffer,
            positions,
            moduli,
        };
        view.check(backend.degree())?;
        view.check_moduli(backend.moduli().len())?;
        Ok(view)
    }

    /// A view of `moduli.len()` consecutive limbs from limb 0, checked only
    /// for the 256-limb bound: inside the crate, where the backend checks
    /// the view before it runs.
    pub(crate) fn whole(buffer: &'a Buffer, moduli: &'a [usize]) -> Result<Self> {
        Ok(Self {
            buffer,
            positions: contiguous(0, moduli.len())?,
            moduli,
        })
    }

    /// A view checked against nothing, for tests of the backends' own
    /// checks (feature `test-utils`). It is still safe: every backend
    /// operation checks its views before any kernel runs.
    #[cfg(any(test, feature = "test-utils"))]
    pub fn unchecked(buffer: &'a Buffer, positions: &'a [usize], moduli: &'a [usize]) -> Self {
        Self {
            buffer,
            positions,
            moduli,
        }
    }

    /// The buffer.
    pub fn buffer(&self) -> &'a Buffer {
        self.buffer
    }

    /// Each limb's position in the buffer.
    pub fn positions(&self) -> &'a [usize] {
        self.positions
    }

    /// Each limb's global modulus index.
    pub fn moduli(&self) -> &'a [usize] {
        self.moduli
    }

    /// Number of limbs in the view.
    pub fn len(&self) -> usize {
        self.moduli.len()
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.moduli.is_empty()
    }

    /// Whether the buffer holds secret-key material: what is computed from
    /// it into a temporary is secret too, and backends allocate such
    /// temporaries sensitive.
    pub fn is_sensitive(&self) -> bool {
        self.buffer.is_sensitive()
    }

    /// Checks that the view fits its buffer at degree `n`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`].
    pub fn check(&self, n: usize) -> Result<()> {
        check_shape(self.buffer, self.positions, self.moduli, n, false)
    }

    /// Checks that every modulus index is below `count`, the number of
    /// moduli of the backend the view is used with.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] for the first index out of range.
    pub fn check_moduli(&self, count: usize) -> Result<()> {
        check_moduli(self.moduli, count)
    }
}

impl<'a> LimbsMut<'a> {
    /// A mutable view of `moduli.len()` consecutive limbs starting at limb
    /// 0, for use with `backend`.
    ///
    /// # Errors
    /// As [`Limbs::new`].
    pub fn new<B: Backend + ?Sized>(
        backend: &B,
        buffer: &'a mut Buffer,
        moduli: &'a [usize],
    ) -> Result<Self> {
        Self::with_positions(backend, buffer, contiguous(0, moduli.len())?, moduli)
    }

    /// A mutable view of the limbs at `positions` of `buffer`, for use with
    /// `backend`.
    ///
    /// # Errors
    /// As [`Limbs::with_positions`]; [`Error::LengthMismatch`] for a
    /// position listed twice.
    pub fn with_positions<B: Backend + ?Sized>(
        backend: &B,
        buffer: &'a mut Buffer,
        positions: &'a [usize],
        moduli: &'a [usize],
    ) -> Result<Self> {
        let view = Self {
            buffer,
            positions,
            moduli,
        };
        view.check(backend.degree())?;
        view.check_moduli(backend.moduli().len())?;
        Ok(view)
    }

    /// As [`Limbs::whole`], mutable.
    pub(crate) fn whole(buffer: &'a mut Buffer, moduli: &'a [usize]) -> Result<Self> {
        Ok(Self {
            buffer,
            positions: contiguous(0, moduli.len())?,
            moduli,
        })
    }

    /// As [`Limbs::unchecked`], mutable (feature `test-utils`).
    #[cfg(any(test, feature = "test-utils"))]
    pub fn unchecked(buffer: &'a mut Buffer, positions: &'a [usize], moduli: &'a [usize]) -> Self {
        Self {
            buffer,
            positions,
            moduli,
        }
    }

    /// The buffer.
    pub fn buffer(&self) -> &Buffer {
        self.buffer
    }

    /// Each limb's position in the buffer.
    pub fn positions(&self) -> &'a [usize] {
        self.positions
    }

    /// Each limb's global modulus index.
    pub fn moduli(&self) -> &'a [usize] {
        self.moduli
    }

    /// Number of limbs in the view.
    pub fn len(&self) -> usize {
        self.moduli.len()
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.moduli.is_empty()
    }

    /// Whether the buffer holds secret-key material.
    pub fn is_sensitive(&self) -> bool {
        self.buffer.is_sensitive()
    }

    /// A shorter-lived mutable view of the same limbs.
    pub fn reborrow(&mut self) -> LimbsMut<'_> {
        LimbsMut {
            buffer: self.buffer,
            positions: self.positions,
            moduli: self.moduli,
        }
    }

    /// A read-only view of the same limbs.
    pub fn as_limbs(&self) -> Limbs<'_> {
        Limbs {
            buffer: self.buffer,
            positions: self.positions,
            moduli: self.moduli,
        }
    }

    /// Checks that the view fits its buffer at degree `n` and that its
    /// positions are distinct.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`].
    pub fn check(&self, n: usize) -> Result<()> {
        check_shape(self.buffer, self.positions, self.moduli, n, true)
    }

    /// Checks that every modulus index is below `count`, the number of
    /// moduli of the backend the view is used with.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] for the first index out of range.
    pub fn check_moduli(&self, count: usize) -> Result<()> {
        check_moduli(self.moduli, count)
    }
}

/// A read-only view of limbs that repeat: the NTT form of a polynomial in
/// `X^{2^log_gap}` (a plaintext whose slots repeat,
/// [`crate::encoding::Plaintext::is_periodic`]), each limb kept as its
/// `N >> log_gap` distinct values. Limb `i` is the `N >> log_gap` words
/// from word `positions[i]·(N >> log_gap)` of the buffer, and its value at
/// `j` is word `j >> log_gap`. With `log_gap = 0` it is a [`Limbs`] view.
#[derive(Clone, Copy, Debug)]
pub struct PeriodicLimbs<'a> {
    /// The limbs, at the degree `N >> log_gap`.
    pub(crate) limbs: Limbs<'a>,
    /// `log2` of the repetition.
    pub(crate) log_gap: u32,
}

impl<'a> PeriodicLimbs<'a> {
    /// A view of `moduli.len()` consecutive limbs of `N >> log_gap` words
    /// from limb 0, for use with `backend`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] for limbs beyond the buffer, a modulus
    /// index the backend does not have, or `2^log_gap ≥ N`.
    pub fn new<B: Backend + ?Sized>(
        backend: &B,
        buffer: &'a Buffer,
        moduli: &'a [usize],
        log_gap: u32,
    ) -> Result<Self> {
        let view = Self {
            limbs: Limbs::whole(buffer, moduli)?,
            log_gap,
        };
        view.check(backend.degree())?;
        view.limbs.check_moduli(backend.moduli().len())?;
        Ok(view)
    }

    /// `log2` of the repetition (0: every value kept).
    pub fn log_gap(&self) -> u32 {
        self.log_gap
    }

    /// The limbs as stored: `N >> log_gap` words each.
    pub fn stored(&self) -> Limbs<'a> {
        self.limbs
    }

    /// Number of limbs in the view.
    pub fn len(&self) -> usize {
        self.limbs.len()
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.limbs.is_empty()
    }

    /// Checks that `2^log_gap < n` and that the limbs fit the buffer at
    /// degree `n >> log_gap`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`].
    pub fn check(&self, n: usize) -> Result<()> {
        let log_n = n.max(1).trailing_zeros();
        if self.log_gap >= log_n {
            return Err(Error::LengthMismatch {
                expected: log_n as usize,
                actual: self.log_gap as usize,
            });
        }
        self.limbs.check(n >> self.log_gap)
    }
}

impl<'a> From<Limbs<'a>> for PeriodicLimbs<'a> {
    /// Every value kept: `log_gap = 0`.
    fn from(limbs: Limbs<'a>) -> Self {
        Self { limbs, log_gap: 0 }
    }
}

/// Whether any of `views` holds secret-key material: a temporary computed
/// from them is then allocated sensitive, so that sensitivity follows the
/// data and no call site has to remember it.
pub(crate) fn any_sensitive(views: &[&Limbs<'_>]) -> bool {
    views.iter().any(|v| v.is_sensitive())
}

/// Checks that every global modulus index in `moduli` is below `count`, the
/// number of moduli a backend knows: kernels index their constant and
/// twiddle tables by these indices, so an unchecked one reads past them.
///
/// # Errors
/// [`Error::LengthMismatch`] with `expected: count` and `actual: index + 1`
/// for the first index out of range, as the CPU backend reports it.
pub(crate) fn check_moduli(moduli: &[usize], count: usize) -> Result<()> {
    match moduli.iter().find(|&&m| m >= count) {
        Some(&m) => Err(Error::LengthMismatch {
            expected: count,
            actual: m.saturating_add(1),
        }),
        None => Ok(()),
    }
}

fn check_shape(
    buffer: &Buffer,
    positions: &[usize],
    moduli: &[usize],
    n: usize,
    distinct: bool,
) -> Result<()> {
    if positions.len() != moduli.len() {
        return Err(Error::LengthMismatch {
            expected: moduli.len(),
            actual: positions.len(),
        });
    }
    let limbs = buffer.words() / n.max(1);
    if let Some(&p) = positions.iter().find(|&&p| p >= limbs) {
        return Err(Error::LengthMismatch {
            expected: limbs,
            actual: p + 1,
        });
    }
    if distinct {
        let mut seen = vec![false; limbs];
        for &p in positions {
            match seen.get_mut(p) {
                Some(s) if !*s => *s = true,
                _ => {
                    return Err(Error::LengthMismatch {
                        expected: positions.len(),
                        actual: p,
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use hemem_memory::{Allocator, MemoryClass};

    use super::*;

    const N: usize = 8;

    #[test]
    fn modulus_indices_are_checked_against_the_backend_count() {
        let mut buffer = Allocator::host()
            .allocate(MemoryClass::Temporary, 2 * N * 8)
            .expect("host allocation");
        assert_eq!(check_moduli(&[0, 2], 3), Ok(()));
        assert_eq!(check_moduli(&[], 0), Ok(()));
        for (moduli, actual) in [
            ([0, 3], 4),
            ([3, 0], 4),
            ([0, 7], 8),
            ([0, usize::MAX], usize::MAX),
        ] {
            let expected = Err(Error::LengthMismatch {
                expected: 3,
                actual,
            });
            assert_eq!(check_moduli(&moduli, 3), expected, "{moduli:?}");
            let view = Limbs {
                buffer: &buffer,
                positions: &[0, 1],
                moduli: &moduli,
            };
            // The shape is fine; only the backend's count rejects the view.
            assert_eq!(view.check(N), Ok(()));
            assert_eq!(view.check_moduli(3), expected);
            let view = LimbsMut {
                buffer: &mut buffer,
                positions: &[0, 1],
                moduli: &moduli,
            };
            assert_eq!(view.check(N), Ok(()));
            assert_eq!(view.check_moduli(3), expected);
        }
    }

    #[test]
    fn checked_constructors_reject_positions_and_moduli_out_of_range() {
        use crate::Context;
        use crate::backend::DeviceSelection;
        use crate::params::{Parameters, Preset, SecurityCheck};
        let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)
            .expect("parameters");
        let context = Context::new(params, DeviceSelection::Cpu).expect("context");
        let backend = context.backend().as_ref();
        let count = backend.moduli().len();
        let mut buffer = backend
            .allocate(MemoryClass::Temporary, 2, false)
            .expect("allocation");
        let mismatch = |expected, actual| Err(Error::LengthMismatch { expected, actual });

        // Fine views pass, and report what they were made of.
        let fine = [0, count - 1];
        let view =
            Limbs::with_positions(backend, &buffer, &[1, 0], &fine).expect("a view that fits");
        assert_eq!(
            (view.positions(), view.moduli()),
            (&[1, 0][..], &[0, count - 1][..])
        );
        assert!(Limbs::new(backend, &buffer, &[3, 4]).is_ok());
        assert!(LimbsMut::new(backend, &mut buffer, &[3, 4]).is_ok());

        // A position beyond the buffer's two limbs.
        assert_eq!(
            Limbs::with_positions(backend, &buffer, &[0, 2], &[0, 1]).map(|_| ()),
            mismatch(2, 3)
        );
        assert_eq!(
            LimbsMut::with_positions(backend, &mut buffer, &[2], &[0]).map(|_| ()),
            mismatch(2, 3)
        );
        assert_eq!(
            Limbs::new(backend, &buffer, &[0, 1, 2]).map(|_| ()),
            mismatch(2, 3)
        );
        // A modulus index the backend does not have.
        for bad in [count, count + 7, usize::MAX] {
            let actual = bad.saturating_add(1);
            assert_eq!(
                Limbs::with_positions(backend, &buffer, &[0, 1], &[0, bad]).map(|_| ()),
                mismatch(count, actual)
            );
            assert_eq!(
                LimbsMut::new(backend, &mut buffer, &[bad]).map(|_| ()),
                mismatch(count, actual)
            );
        }
        // A position listed twice in a mutable view; lists of two lengths.
        assert!(LimbsMut::with_positions(backend, &mut buffer, &[1, 1], &[0, 1]).is_err());
        assert!(Limbs::with_positions(backend, &buffer, &[0, 1], &[0]).is_err());
    }

    #[test]
    fn positions_outside_the_buffer_are_rejected() {
        let buffer = Allocator::host()
            .allocate(MemoryClass::Temporary, 2 * N * 8)
            .expect("host allocation");
        let view = Limbs {
            buffer: &buffer,
            positions: &[0, 2],
            moduli: &[0, 1],
        };
        assert_eq!(
            view.check(N),
            Err(Error::LengthMismatch {
                expected: 2,
                actual: 3
            })
        );
    }
}
