//! What the [`Backend`] trait's provided methods share: shapes of periodic
//! and compact expansions, and the operations done part by part (one call
//! per polynomial of a batch) on backends without a batched kernel.

use hemem_memory::{Buffer, MemoryClass};

use super::{Addend, Backend, BinaryOp, Limbs, LimbsMut, contiguous};
use crate::Result;
use crate::ntt::GaloisElement;
use crate::sampling::UniformSeed;

/// The most values a limb of a periodic plaintext holds
/// ([`Backend::expand_periodic`]): one GPU block transforms them in shared
/// memory. Diagonals whose period needs more are kept whole.
pub const MAX_PERIODIC_POINTS: usize =
    hemem_gpu_kernels::launch::ckks::encode::MAX_PERIODIC_POINTS as usize;

/// Checks a periodic expansion's shape ([`Backend::expand_periodic`]):
/// returns the points `N/gap` of each limb.
///
/// # Errors
/// [`crate::Error::LengthMismatch`] for a gap that is not a power of two
/// above 1 dividing `n`, more than [`MAX_PERIODIC_POINTS`] points, sources
/// and outputs of different counts, or an output too small.
pub(crate) fn periodic_shape(
    compact: &[&Buffer],
    gap: usize,
    moduli: &[usize],
    out: &[&mut Buffer],
    n: usize,
) -> Result<usize> {
    let Some(first) = compact.first() else {
        return match out.len() {
            0 => Ok(0),
            actual => Err(crate::Error::LengthMismatch {
                expected: 0,
                actual,
            }),
        };
    };
    let points = compact_words(first, gap, n)?;
    if gap < 2 || points > MAX_PERIODIC_POINTS {
        return Err(crate::Error::LengthMismatch {
            expected: MAX_PERIODIC_POINTS,
            actual: points,
        });
    }
    if compact.len() != out.len() {
        return Err(crate::Error::LengthMismatch {
            expected: compact.len(),
            actual: out.len(),
        });
    }
    for c in compact.iter().skip(1) {
        compact_words(c, gap, n)?;
    }
    let words = moduli.len() * points;
    if let Some(small) = out.iter().find(|o| o.words() < words) {
        return Err(crate::Error::LengthMismatch {
            expected: words,
            actual: small.words(),
        });
    }
    Ok(points)
}

/// Compact expansion one part at a time: the default of
/// [`Backend::expand_compact`] and a fallback for batched kernels.
///
/// # Errors
/// As [`Backend::expand_compact`].
pub(crate) fn expand_by_parts<B: Backend + ?Sized>(
    backend: &B,
    compact: &[&Buffer],
    gap: usize,
    out: &mut [LimbsMut<'_>],
) -> Result<()> {
    if compact.len() != out.len() {
        return Err(crate::Error::LengthMismatch {
            expected: compact.len(),
            actual: out.len(),
        });
    }
    for (c, o) in compact.iter().zip(out.iter_mut()) {
        backend.expand_coefficients(c, gap, o.reborrow())?;
        backend.ntt_forward(o.reborrow())?;
    }
    Ok(())
}

/// Checks a compact expansion's shape: `gap` a power of two dividing `n`
/// and `compact` holding at least `n/gap` words; returns `n/gap`.
///
/// # Errors
/// [`crate::Error::LengthMismatch`].
pub(crate) fn compact_words(compact: &Buffer, gap: usize, n: usize) -> Result<usize> {
    if gap == 0 || !gap.is_power_of_two() || gap > n {
        return Err(crate::Error::LengthMismatch {
            expected: n,
            actual: gap,
        });
    }
    let count = n / gap;
    if compact.words() < count {
        return Err(crate::Error::LengthMismatch {
            expected: count,
            actual: compact.words(),
        });
    }
    Ok(count)
}

/// The key-switching inner product as one multiply(-accumulate) per digit:
/// the default of [`Backend::key_switch_inner_product`], and a fallback for
/// backends whose fused kernel does not fit the views.
///
/// # Errors
/// Shape or placement errors; an empty or uneven digit list.
pub(crate) fn inner_product_by_parts<B: Backend + ?Sized>(
    backend: &B,
    digits: &[Limbs<'_>],
    b: &[Limbs<'_>],
    a: &[Limbs<'_>],
    mut out0: LimbsMut<'_>,
    mut out1: LimbsMut<'_>,
) -> Result<()> {
    if digits.is_empty() || digits.len() != b.len() || digits.len() != a.len() {
        return Err(crate::Error::LengthMismatch {
            expected: digits.len(),
            actual: b.len().min(a.len()),
        });
    }
    for (j, ((d, bj), aj)) in digits.iter().zip(b).zip(a).enumerate() {
        if j == 0 {
            backend.binary(BinaryOp::Mul, *d, *bj, out0.reborrow())?;
            backend.binary(BinaryOp::Mul, *d, *aj, out1.reborrow())?;
        } else {
            backend.mul_add_assign(out0.reborrow(), *d, *bj)?;
            backend.mul_add_assign(out1.reborrow(), *d, *aj)?;
        }
    }
    Ok(())
}

/// The seeded key-switching inner product by expansion: every `a_j` into a
/// temporary by [`Backend::uniform_from_seed`], then the inner product (or
/// its Galois form). The default of [`Backend::key_switch_inner_product_seeded`],
/// and a fallback for backends whose fused kernel does not fit the views.
///
/// # Errors
/// As [`Backend::key_switch_inner_product`]; allocation errors.
pub(crate) fn seeded_inner_product_by_parts<B: Backend + ?Sized>(
    backend: &B,
    digits: &[Limbs<'_>],
    galois: Option<GaloisElement>,
    b: &[Limbs<'_>],
    seed: &UniformSeed,
    out0: LimbsMut<'_>,
    out1: LimbsMut<'_>,
) -> Result<()> {
    let moduli = out0.moduli;
    let a = (0..digits.len())
        .map(|j| {
            let mut buffer = backend.allocate(MemoryClass::Temporary, moduli.len(), false)?;
            backend.uniform_from_seed(seed, j, LimbsMut::whole(&mut buffer, moduli)?)?;
            Ok(buffer)
        })
        .collect::<Result<Vec<_>>>()?;
    let views = a
        .iter()
        .map(|buffer| Limbs::whole(buffer, moduli))
        .collect::<Result<Vec<_>>>()?;
    match galois {
        Some(g) => backend.key_switch_inner_product_galois(digits, g, b, &views, out0, out1),
        None => backend.key_switch_inner_product(digits, b, &views, out0, out1),
    }
}

/// [`Backend::mod_down_many`] one part at a time: its default, and the GPU
/// backend's fallback for parts its kernels do not take together.
///
/// # Errors
/// Shape or placement errors; lists of different lengths.
pub(crate) fn mod_down_by_parts<B: Backend + ?Sized>(
    backend: &B,
    x: &[Limbs<'_>],
    p_count: usize,
    addend: &[Option<Addend<'_>>],
    out: &mut [LimbsMut<'_>],
) -> Result<()> {
    if addend.len() != x.len() || out.len() != x.len() {
        return Err(crate::Error::LengthMismatch {
            expected: x.len(),
            actual: if addend.len() == x.len() {
                out.len()
            } else {
                addend.len()
            },
        });
    }
    for ((x, addend), out) in x.iter().zip(addend).zip(out.iter_mut()) {
        match addend {
            Some(e) => backend.mod_down_add(*x, p_count, *e, out.reborrow())?,
            None => backend.mod_down(*x, p_count, out.reborrow())?,
        }
    }
    Ok(())
}

/// A [`Backend::mul_sum_periodic`] of no terms: nothing to add into an
/// accumulated sum, and a refusal where the sum would be the result.
///
/// # Errors
/// [`crate::Error::LengthMismatch`] without `accumulate`.
pub(crate) fn empty_sum(accumulate: bool) -> Result<()> {
    if accumulate {
        Ok(())
    } else {
        Err(crate::Error::LengthMismatch {
            expected: 1,
            actual: 0,
        })
    }
}

/// The gadget decomposition digit by digit: the default of
/// [`Backend::decompose_mod_up`], and a fallback for backends whose fused
/// kernels do not fit the views.
///
/// # Errors
/// Shape or placement errors; a digit count other than `⌈len/alpha⌉`.
pub(crate) fn decompose_by_parts<B: Backend + ?Sized>(
    backend: &B,
    c: Limbs<'_>,
    alpha: usize,
    out: &mut [LimbsMut<'_>],
) -> Result<()> {
    let count = c.len();
    if alpha == 0 || out.len() != count.div_ceil(alpha) {
        return Err(crate::Error::LengthMismatch {
            expected: count.div_ceil(alpha.max(1)),
            actual: out.len(),
        });
    }
    let mut coeff = backend.allocate(MemoryClass::Temporary, count, c.buffer.is_sensitive())?;
    backend.ntt_inverse_into(c, LimbsMut::whole(&mut coeff, c.moduli)?)?;
    for (j, o) in out.iter_mut().enumerate() {
        let start = j * alpha;
        let end = (start + alpha).min(count);
        let moduli = c.moduli.get(start..end).ok_or(crate::Error::EmptyBasis)?;
        backend.mod_up(
            Limbs {
                buffer: &coeff,
                positions: contiguous(start, end - start)?,
                moduli,
            },
            Some(Limbs {
                buffer: c.buffer,
                positions: c
                    .positions
                    .get(start..end)
                    .ok_or(crate::Error::EmptyBasis)?,
                moduli,
            }),
            o.reborrow(),
        )?;
    }
    Ok(())
}

/// The tensor product by element-wise operations: the default of
/// [`Backend::tensor`] and a fallback for fused kernels.
///
/// # Errors
/// Shape or placement errors.
pub(crate) fn tensor_by_parts<B: Backend + ?Sized>(
    backend: &B,
    [a0, a1, b0, b1]: [Limbs<'_>; 4],
    [d0, mut d1, d2]: [LimbsMut<'_>; 3],
) -> Result<()> {
    backend.binary(BinaryOp::Mul, a0, b0, d0)?;
    backend.binary(BinaryOp::Mul, a0, b1, d1.reborrow())?;
    backend.mul_add_assign(d1, a1, b0)?;
    backend.binary(BinaryOp::Mul, a1, b1, d2)
}
