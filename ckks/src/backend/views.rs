//! [`Limbs`] and [`LimbsMut`]: which limbs of a buffer an operation touches,
//! and under which moduli.

use hemem_memory::Buffer;

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
pub fn contiguous(start: usize, count: usize) -> Result<&'static [usize]> {
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
    pub buffer: &'a Buffer,
    /// Limb positions in the buffer.
    pub positions: &'a [usize],
    /// Global modulus index of each limb.
    pub moduli: &'a [usize],
}

/// A mutable view; positions must be distinct.
#[derive(Debug)]
pub struct LimbsMut<'a> {
    /// The buffer.
    pub buffer: &'a mut Buffer,
    /// Limb positions in the buffer.
    pub positions: &'a [usize],
    /// Global modulus index of each limb.
    pub moduli: &'a [usize],
}

impl<'a> Limbs<'a> {
    /// A view of `moduli.len()` consecutive limbs starting at limb 0.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] beyond 256 limbs.
    pub fn new(buffer: &'a Buffer, moduli: &'a [usize]) -> Result<Self> {
        Ok(Self {
            buffer,
            positions: contiguous(0, moduli.len())?,
            moduli,
        })
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
    /// A view of `moduli.len()` consecutive limbs starting at limb 0.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] beyond 256 limbs.
    pub fn new(buffer: &'a mut Buffer, moduli: &'a [usize]) -> Result<Self> {
        Ok(Self {
            buffer,
            positions: contiguous(0, moduli.len())?,
            moduli,
        })
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
