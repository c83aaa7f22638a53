//! Turning views into host slices.

use hemem_memory::Buffer;

use crate::backend::{Limbs, LimbsMut, compact_words};
use crate::{Error, Result};

/// The view's limbs as slices of N words.
pub(super) fn read_limbs<'a>(view: &Limbs<'a>, n: usize) -> Result<Vec<&'a [u64]>> {
    view.check(n)?;
    let words = view.buffer.host_words()?;
    view.positions
        .iter()
        .map(|&p| {
            words.get(p * n..(p + 1) * n).ok_or(Error::LengthMismatch {
                expected: words.len(),
                actual: (p + 1) * n,
            })
        })
        .collect()
}

/// The view's limbs as disjoint mutable slices of N words.
pub(super) fn write_limbs(view: LimbsMut<'_>, n: usize) -> Result<Vec<&mut [u64]>> {
    view.check(n)?;
    let positions = view.positions;
    let words = view.buffer.host_words_mut()?;
    let mut chunks: Vec<Option<&mut [u64]>> = words.chunks_exact_mut(n).map(Some).collect();
    positions
        .iter()
        .map(|&p| {
            chunks
                .get_mut(p)
                .and_then(Option::take)
                .ok_or(Error::LengthMismatch {
                    expected: positions.len(),
                    actual: p,
                })
        })
        .collect()
}

/// The `N/gap` words of a compact plaintext ([`compact_words`] checks
/// `gap` and the buffer's length).
pub(super) fn host_compact_words(compact: &Buffer, gap: usize, n: usize) -> Result<&[u64]> {
    let count = compact_words(compact, gap, n)?;
    compact
        .host_words()?
        .get(..count)
        .ok_or(Error::LengthMismatch {
            expected: count,
            actual: compact.words(),
        })
}
