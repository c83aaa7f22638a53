//! Small blocks of the paged pool: requests of at most half a page share
//! one-page slabs, carved best fit on 256-byte boundaries, so a one-limb
//! temporary of a test preset does not take a whole 2 MiB page.
//!
//! A slab serves one stream: a hole freed on it is reused in that stream's
//! order, which needs no event. An empty slab goes back to the book (freed
//! on its stream, like any block).

use std::collections::{BTreeMap, HashMap};

use super::book::{Book, PageDriver};
use super::runs::Runs;
use crate::{Result, StreamId};

/// Small blocks start on 256-byte boundaries (what `cuMemAlloc`
/// guarantees, which kernels may rely on).
const ALIGN: u64 = 256;

/// One slab: its stream, free bytes (runs of offsets in the slab) and
/// live blocks.
#[derive(Debug)]
struct Slab {
    stream: StreamId,
    holes: Runs,
    live: u32,
}

/// The slabs of a paged pool. Offsets are bytes into the reserved range.
#[derive(Debug, Default)]
pub(super) struct Slabs {
    /// Slabs by the offset of their first byte.
    slabs: BTreeMap<u64, Slab>,
    /// Live small blocks: offset → bytes taken.
    blocks: HashMap<u64, u64>,
}

impl Slabs {
    /// Whether a request of `bytes` is small (slabs of `page` bytes).
    pub(super) fn is_small(bytes: u64, page: u64) -> bool {
        bytes.div_ceil(ALIGN) * ALIGN <= page / 2
    }

    /// A small block of `bytes` on `stream`: its offset, or `None` when no
    /// slab has room and the book none for a new slab.
    ///
    /// # Errors
    /// Driver errors.
    pub(super) fn allocate<D: PageDriver>(
        &mut self,
        book: &mut Book<D>,
        page: u64,
        bytes: u64,
        stream: StreamId,
    ) -> Result<Option<u64>> {
        let need = bytes.div_ceil(ALIGN) * ALIGN;
        let best = self
            .slabs
            .iter()
            .filter(|(_, slab)| slab.stream == stream)
            .filter_map(|(&base, slab)| {
                let (offset, len) = slab.holes.best_fit_run(need)?;
                Some((len, base, offset))
            })
            .min();
        let (base, offset) = match best {
            Some((_, base, offset)) => (base, offset),
            None => {
                let Some(first) = book.allocate(1, stream)? else {
                    return Ok(None);
                };
                let base = first * page;
                let mut holes = Runs::default();
                holes.insert(0, page);
                self.slabs.insert(
                    base,
                    Slab {
                        stream,
                        holes,
                        live: 0,
                    },
                );
                (base, 0)
            }
        };
        let Some(slab) = self.slabs.get_mut(&base) else {
            return Ok(None);
        };
        slab.holes.remove(offset, need);
        slab.live += 1;
        self.blocks.insert(base + offset, need);
        Ok(Some(base + offset))
    }

    /// Frees the small block at `offset`; an emptied slab goes back to the
    /// book. `false` when no small block starts there.
    ///
    /// # Errors
    /// Driver errors of freeing an emptied slab.
    pub(super) fn free<D: PageDriver>(
        &mut self,
        book: &mut Book<D>,
        page: u64,
        offset: u64,
    ) -> Result<bool> {
        let Some(bytes) = self.blocks.remove(&offset) else {
            return Ok(false);
        };
        let Some((&base, slab)) = self.slabs.range_mut(..=offset).next_back() else {
            return Ok(false);
        };
        slab.holes.insert(offset - base, bytes);
        slab.live = slab.live.saturating_sub(1);
        if slab.live == 0 {
            let stream = slab.stream;
            self.slabs.remove(&base);
            book.free(base / page, stream)?;
        }
        Ok(true)
    }

    /// The number of slabs.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slabs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Slabs;
    use crate::StreamId::{Compute, Copy};
    use crate::cuda::pool::paged::book::Book;
    use crate::cuda::pool::paged::book::mock::MockPages;

    const PAGE: u64 = 4096;

    #[test]
    fn small_blocks_share_a_slab_per_stream_and_an_empty_slab_goes_back() {
        let mut book = Book::new(MockPages::default(), PAGE, 4, 16, 4);
        let mut s = Slabs::default();
        assert!(Slabs::is_small(2048, PAGE) && !Slabs::is_small(2049, PAGE));
        let a = s.allocate(&mut book, PAGE, 1000, Compute).expect("driver");
        let b = s.allocate(&mut book, PAGE, 1000, Compute).expect("driver");
        let (a, b) = (a.expect("room"), b.expect("room"));
        assert_eq!(b, a + 1024, "1000 bytes take 1024");
        let c = s.allocate(&mut book, PAGE, 100, Copy).expect("driver");
        let c = c.expect("room");
        assert_eq!(s.len(), 2, "the copy stream has a slab of its own");
        assert_eq!(book.held_bytes(), 2 * PAGE);
        assert!(s.free(&mut book, PAGE, a).expect("driver"));
        let d = s.allocate(&mut book, PAGE, 512, Compute).expect("driver");
        assert_eq!(d, Some(a), "the freed hole, reused in stream order");
        assert!(!s.free(&mut book, PAGE, a + 8).expect("driver"), "no block");
        for x in [a, b, c] {
            assert!(s.free(&mut book, PAGE, x).expect("driver"));
        }
        assert_eq!(s.len(), 0);
        assert_eq!(book.cached_pages(), 2, "both slabs cached in the book");
    }
}
