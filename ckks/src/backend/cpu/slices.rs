//! Turning views into host slices.

use crate::backend::{Limbs, LimbsMut};
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
