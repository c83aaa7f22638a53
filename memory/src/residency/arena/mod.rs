//! The streaming arena of the `planned` policy: device memory kept for
//! streamed objects alone, in a few large chunks of the pool.
//!
//! Streamed objects first took one pool slot each, beside the ciphertexts
//! and temporaries. The pool then refused requests that the accounting had
//! room for — its free memory lay in pieces too small, between objects of
//! another lifetime — and the look-ahead had to leave a margin of 1/16 of
//! the budget on that account (on the H100, FGb at 2 GiB: 340 refusals in
//! seven bootstraps, 1.6 GB streamed per bootstrap where 0.66 GB is the
//! floor). Here the objects share chunks of their own, where nothing else
//! fragments the memory, as GPUswap keeps swapped-in data apart from the
//! application's allocations; the pool sees a few chunks of one size come
//! and go, and the temporaries keep the rest of it to themselves.
//!
//! Within a chunk, an object takes the smallest hole it fits (best fit).
//! Objects the look-ahead keeps resident go to the lowest chunk with a hole,
//! objects that stream to the highest, so the two kinds do not interleave.
//! This module only places: what leaves, and when the device may reuse a
//! freed range, is the residency manager's (it orders the copy stream after
//! the compute stream before it frees anything).

mod placement;

use std::collections::BTreeMap;

use crate::DevicePtr;

/// Placement granularity: objects start on 256-byte boundaries (the
/// alignment `cuMemAlloc` guarantees, which kernels may rely on).
const ALIGN: u64 = 256;

/// The driver pool's physical granularity (see `Pool::cap`): chunks of
/// 128 MiB and more are multiples of it, so none leaves part of a pool
/// chunk unusable (the paged pool's 2 MiB pages divide it too).
const POOL_GRANULE: u64 = 32 << 20;

/// The granularity of smaller chunks (a GPU page), and of the last chunk
/// the room allows.
pub(super) const CHUNK_GRANULE: u64 = 2 << 20;

/// Chunks are twice the largest object, and at least an eighth of the
/// budget up to this size (fewer, larger holes).
const LARGE_CHUNK: u64 = 128 << 20;

/// One chunk: its device range and its holes (offset → length).
#[derive(Debug)]
struct Chunk {
    base: DevicePtr,
    bytes: u64,
    holes: BTreeMap<u64, u64>,
    /// Objects placed in it.
    objects: u32,
}

impl Chunk {
    fn new(base: DevicePtr, bytes: u64) -> Self {
        Self {
            base,
            bytes,
            holes: BTreeMap::from([(0, bytes)]),
            objects: 0,
        }
    }

    /// The offset of the smallest hole that holds `bytes`, and that hole's
    /// length.
    fn best_fit(&self, bytes: u64) -> Option<(u64, u64)> {
        self.holes
            .iter()
            .filter(|&(_, &len)| len >= bytes)
            .min_by_key(|&(&offset, &len)| (len, offset))
            .map(|(&o, &l)| (o, l))
    }

    fn take(&mut self, offset: u64, hole: u64, bytes: u64) {
        self.holes.remove(&offset);
        if hole > bytes {
            self.holes.insert(offset + bytes, hole - bytes);
        }
        self.objects += 1;
    }

    /// Returns `[offset, offset + bytes)` to the holes, merged with its
    /// neighbours.
    fn give_back(&mut self, offset: u64, bytes: u64) {
        let (mut start, mut len) = (offset, bytes);
        if let Some((&before, &before_len)) = self.holes.range(..offset).next_back()
            && before + before_len == offset
        {
            self.holes.remove(&before);
            start = before;
            len += before_len;
        }
        if let Some(&after_len) = self.holes.get(&(offset + bytes)) {
            self.holes.remove(&(offset + bytes));
            len += after_len;
        }
        self.holes.insert(start, len);
        self.objects = self.objects.saturating_sub(1);
    }

    fn contains(&self, ptr: DevicePtr) -> bool {
        ptr.0 >= self.base.0 && ptr.0 < self.base.0 + self.bytes
    }
}

/// Where a placed object lies: its chunk (by index) and address.
pub(super) type Placed = (usize, DevicePtr);

/// The chunks streamed objects are placed in.
#[derive(Debug, Default)]
pub(super) struct Arena {
    chunks: Vec<Chunk>,
    /// The size new chunks get (0 until the first chunk is sized).
    chunk_bytes: u64,
}

impl Arena {
    /// The bytes an object of `bytes` occupies.
    pub(super) fn footprint(bytes: u64) -> u64 {
        bytes.div_ceil(ALIGN) * ALIGN
    }

    /// The size of the chunks: twice the largest object (`largest`, asked
    /// for once), and at least an eighth of `budget` up to [`LARGE_CHUNK`];
    /// whole pool granules from [`LARGE_CHUNK`] on, whole GPU pages below.
    /// Fixed by the first call.
    pub(super) fn chunk_bytes(&mut self, largest: impl FnOnce() -> u64, budget: u64) -> u64 {
        if self.chunk_bytes == 0 {
            let floor = LARGE_CHUNK.min(budget / 8);
            let want = floor.max(Self::footprint(largest()).saturating_mul(2));
            let granule = if want >= LARGE_CHUNK {
                POOL_GRANULE
            } else {
                CHUNK_GRANULE
            };
            self.chunk_bytes = want.div_ceil(granule) * granule;
        }
        self.chunk_bytes
    }

    /// Whether an object of `bytes` can live in a chunk at all (larger ones
    /// take a pool slot of their own).
    pub(super) fn holds(&self, bytes: u64) -> bool {
        self.chunk_bytes != 0 && Self::footprint(bytes) <= self.chunk_bytes
    }

    /// Bytes of all chunks.
    pub(super) fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.bytes).sum()
    }

    /// Number of chunks.
    pub(super) fn len(&self) -> usize {
        self.chunks.len()
    }

    /// Adds a chunk of the device range `[base, base + bytes)`.
    pub(super) fn add(&mut self, base: DevicePtr, bytes: u64) {
        self.chunks.push(Chunk::new(base, bytes));
    }

    /// Places an object of `bytes` in the smallest hole that holds it,
    /// searching the chunks from the lowest (`low`, objects that stay) or
    /// from the highest (objects that stream); `None` when no hole does.
    pub(super) fn place(&mut self, bytes: u64, low: bool) -> Option<Placed> {
        let need = Self::footprint(bytes);
        let order: Box<dyn Iterator<Item = usize>> = if low {
            Box::new(0..self.chunks.len())
        } else {
            Box::new((0..self.chunks.len()).rev())
        };
        for index in order {
            let chunk = self.chunks.get_mut(index)?;
            if let Some((offset, hole)) = chunk.best_fit(need) {
                chunk.take(offset, hole, need);
                return Some((index, DevicePtr(chunk.base.0 + offset)));
            }
        }
        None
    }

    /// Gives an object's range back; `false` if `ptr` lies in no chunk.
    pub(super) fn release(&mut self, ptr: DevicePtr, bytes: u64) -> bool {
        let need = Self::footprint(bytes);
        match self.chunks.iter_mut().find(|c| c.contains(ptr)) {
            Some(chunk) => {
                let offset = ptr.0 - chunk.base.0;
                chunk.give_back(offset, need);
                true
            }
            None => false,
        }
    }

    /// The chunk `ptr` lies in.
    /// Each chunk's base and holes (offset, length), in order.
    fn layout(&self) -> impl Iterator<Item = (DevicePtr, &BTreeMap<u64, u64>)> {
        self.chunks.iter().map(|c| (c.base, &c.holes))
    }

    pub(super) fn chunk_of(&self, ptr: DevicePtr) -> Option<usize> {
        self.chunks.iter().position(|c| c.contains(ptr))
    }

    /// Removes chunk `index`, which must hold no object; returns its range.
    pub(super) fn remove(&mut self, index: usize) -> Option<(DevicePtr, u64)> {
        let chunk = self.chunks.get(index)?;
        if chunk.objects != 0 {
            return None;
        }
        let chunk = self.chunks.remove(index);
        Some((chunk.base, chunk.bytes))
    }

    /// The largest hole of any chunk.
    #[cfg(test)]
    pub(super) fn largest_hole(&self) -> u64 {
        self.chunks
            .iter()
            .flat_map(|c| c.holes.values())
            .copied()
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn objects_take_the_smallest_hole_and_freed_ranges_merge() {
        let mut a = Arena::default();
        assert_eq!(
            a.chunk_bytes(|| 100 * MIB, 1 << 40),
            224 * MIB,
            "twice 100 MiB, in 32 MiB granules"
        );
        a.add(DevicePtr(1 << 40), 224 * MIB);
        let (_, x) = a.place(100 * MIB, true).expect("fits");
        let (_, y) = a.place(50 * MIB, true).expect("fits");
        let (_, z) = a.place(74 * MIB, true).expect("fits");
        assert_eq!(
            (x.0, y.0, z.0),
            (1 << 40, (1 << 40) + 100 * MIB, (1 << 40) + 150 * MIB)
        );
        assert!(a.place(MIB, true).is_none(), "full");
        // Free the middle: a 50 MiB hole; a 40 MiB object takes it.
        assert!(a.release(y, 50 * MIB));
        assert_eq!(a.largest_hole(), 50 * MIB);
        let (_, w) = a.place(40 * MIB, false).expect("fits");
        assert_eq!(w, y);
        // Freeing the rest merges everything back into one hole.
        for (p, b) in [(x, 100 * MIB), (w, 40 * MIB), (z, 74 * MIB)] {
            assert!(a.release(p, b));
        }
        assert_eq!(a.largest_hole(), 224 * MIB);
        assert!(!a.release(DevicePtr(7), 1), "not in the arena");
        assert_eq!(a.remove(0), Some((DevicePtr(1 << 40), 224 * MIB)));
        assert_eq!(a.len(), 0);
    }

    #[test]
    fn stable_objects_fill_from_the_low_chunks_and_streaming_ones_from_the_high() {
        let mut a = Arena::default();
        assert_eq!(
            a.chunk_bytes(|| 10 * MIB, 1 << 30),
            128 * MIB,
            "an eighth of the budget"
        );
        assert_eq!(Arena::default().chunk_bytes(|| 3 * MIB, 64 * MIB), 8 * MIB);
        assert_eq!(
            Arena::default().chunk_bytes(|| 7 * MIB + 1, 64 * MIB),
            16 * MIB
        );
        a.add(DevicePtr(1 << 40), 128 * MIB);
        a.add(DevicePtr(2 << 40), 128 * MIB);
        let (low, _) = a.place(MIB, true).expect("fits");
        let (high, p) = a.place(MIB, false).expect("fits");
        assert_eq!((low, high), (0, 1));
        assert_eq!(a.chunk_of(p), Some(1));
        // A chunk with an object in it cannot be removed.
        assert_eq!(a.remove(1), None);
        assert!(a.release(p, MIB));
        assert_eq!(a.remove(1), Some((DevicePtr(2 << 40), 128 * MIB)));
        // Sizes are rounded to the alignment.
        assert_eq!(Arena::footprint(1), 256);
        assert!(a.holds(128 * MIB) && !a.holds(128 * MIB + 1));
    }
}
