//! Pinned (page-locked) host memory from `cuMemHostAlloc`: one region
//! allocated up front and handed out in blocks, because allocating pinned
//! memory is slow (`cudaMallocHost` + free of 256 MiB: 90.9 ms on the H200).

use std::collections::BTreeMap;
use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::CudaContext;
use cudarc::driver::result;
use cudarc::driver::sys;

use crate::error::driver;
use crate::{Error, Result};

/// Blocks start on 512-byte boundaries (64 words), which DMA likes.
const ALIGN_WORDS: usize = 64;

/// One `cuMemHostAlloc` region, zeroed once when made.
pub(crate) struct PinnedRegion {
    ptr: NonNull<u64>,
    words: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: the region is plain host memory owned by this value; access to its
// words goes through PinnedBlock (disjoint ranges) or the staging slots,
// which are used under a mutex.
unsafe impl Send for PinnedRegion {}
// SAFETY: as above; &PinnedRegion hands out no references by itself.
unsafe impl Sync for PinnedRegion {}

impl fmt::Debug for PinnedRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedRegion")
            .field("words", &self.words)
            .finish_non_exhaustive()
    }
}

impl PinnedRegion {
    /// Allocates `words` words of portable, device-mapped pinned memory and
    /// zeroes them.
    ///
    /// # Errors
    /// Driver errors (out of memory among them).
    pub(crate) fn new(ctx: &Arc<CudaContext>, words: usize) -> Result<Self> {
        let words = words.max(1);
        let bytes = words.checked_mul(8).ok_or(Error::TooLarge {
            requested: usize::MAX,
            limit: usize::MAX / 8,
            class: crate::MemoryClass::Temporary,
        })?;
        ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: the context is current; the returned pointer is page
        // aligned (so aligned for u64) and owns `bytes` bytes until freed in
        // Drop.
        let raw = unsafe { result::malloc_host(bytes, flags) }.map_err(driver("cuMemHostAlloc"))?;
        let ptr = NonNull::new(raw.cast::<u64>()).ok_or(Error::OutOfMemory {
            requested: bytes,
            placement: crate::Placement::PinnedHost,
            class: crate::MemoryClass::Temporary,
        })?;
        // SAFETY: ptr owns `words` u64s; writing zeros initialises them all.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, words) };
        Ok(Self {
            ptr,
            words,
            ctx: Arc::clone(ctx),
        })
    }

    /// Words in the region.
    pub(crate) fn words(&self) -> usize {
        self.words
    }

    /// The host address of word `offset` (also its device address: the
    /// memory is device-mapped and addresses are unified).
    pub(crate) fn addr(&self, offset: usize) -> u64 {
        self.ptr.as_ptr().wrapping_add(offset) as u64
    }

    /// The whole region as a slice.
    ///
    /// Callers hold the region exclusively (the staging slot's mutex).
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u64] {
        // SAFETY: ptr owns `words` initialised u64s; &mut self gives
        // exclusive access for the borrow's lifetime.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.words) }
    }
}

impl Drop for PinnedRegion {
    fn drop(&mut self) {
        // Errors cannot be reported from here: the region is gone either way.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: ptr came from cuMemHostAlloc and is freed once; every
        // PinnedBlock holds an Arc to the region, so none outlives it, and
        // staging slots wait for their last copy before the region drops.
        let _ = unsafe { result::free_host(self.ptr.as_ptr().cast()) };
    }
}

/// A block of the pinned arena: `words` words at `offset`, owned exclusively.
/// Host-accessible as a slice.
pub struct PinnedBlock {
    region: Arc<PinnedRegion>,
    offset: usize,
    words: usize,
}

impl fmt::Debug for PinnedBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedBlock")
            .field("offset", &self.offset)
            .field("words", &self.words)
            .finish()
    }
}

impl PinnedBlock {
    /// The block's words.
    pub fn as_slice(&self) -> &[u64] {
        // SAFETY: [offset, offset + words) lies inside the region (the arena
        // checks), is initialised, and no other block covers it; &self gives
        // shared access.
        unsafe { std::slice::from_raw_parts(self.region.ptr.as_ptr().add(self.offset), self.words) }
    }

    /// The block's words, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u64] {
        // SAFETY: as in as_slice; &mut self gives exclusive access, and no
        // other block aliases the range.
        unsafe {
            std::slice::from_raw_parts_mut(self.region.ptr.as_ptr().add(self.offset), self.words)
        }
    }

    /// The block's address (host and device: unified addressing).
    pub fn addr(&self) -> u64 {
        self.region.addr(self.offset)
    }
}

/// Free ranges of an arena, offset → length in words: first fit, coalescing
/// on release.
#[derive(Debug)]
struct FreeList {
    free: BTreeMap<usize, usize>,
}

impl FreeList {
    fn new(words: usize) -> Self {
        let mut free = BTreeMap::new();
        free.insert(0, words);
        Self { free }
    }

    /// The offset of a free range of `words` (already aligned) words.
    fn allocate(&mut self, words: usize) -> Option<usize> {
        let (&offset, &len) = self.free.iter().find(|(_, len)| **len >= words)?;
        self.free.remove(&offset);
        if len > words {
            self.free.insert(offset + words, len - words);
        }
        Some(offset)
    }

    fn release(&mut self, mut offset: usize, mut len: usize) {
        if let Some((&prev, &prev_len)) = self.free.range(..offset).next_back()
            && prev + prev_len == offset
        {
            self.free.remove(&prev);
            offset = prev;
            len += prev_len;
        }
        if let Some(next_len) = self.free.remove(&(offset + len)) {
            len += next_len;
        }
        self.free.insert(offset, len);
    }
}

/// The pre-allocated pinned region and the free ranges in it.
pub(crate) struct PinnedArena {
    region: Arc<PinnedRegion>,
    free: Mutex<FreeList>,
}

impl fmt::Debug for PinnedArena {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedArena")
            .field("words", &self.region.words())
            .finish_non_exhaustive()
    }
}

impl PinnedArena {
    /// Allocates the region: `bytes` rounded up to whole aligned blocks.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self> {
        let words = bytes
            .div_ceil(8)
            .next_multiple_of(ALIGN_WORDS)
            .max(ALIGN_WORDS);
        let region = Arc::new(PinnedRegion::new(ctx, words)?);
        let free = Mutex::new(FreeList::new(region.words()));
        Ok(Self { region, free })
    }

    /// Bytes in the arena.
    pub(crate) fn capacity_bytes(&self) -> u64 {
        self.region.words() as u64 * 8
    }

    /// A block of at least `words` words, or `None` if no free range fits.
    pub(crate) fn allocate(&self, words: usize) -> Option<PinnedBlock> {
        let want = words.max(1).next_multiple_of(ALIGN_WORDS);
        let offset = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .allocate(want)?;
        Some(PinnedBlock {
            region: Arc::clone(&self.region),
            offset,
            words: words.max(1),
        })
    }

    /// Whether `block` came from this arena.
    pub(crate) fn owns(&self, block: &PinnedBlock) -> bool {
        Arc::ptr_eq(&block.region, &self.region)
    }

    /// Returns a block (which must come from this arena).
    pub(crate) fn release(&self, block: PinnedBlock) {
        if !Arc::ptr_eq(&block.region, &self.region) {
            return;
        }
        let (offset, len) = (
            block.offset,
            block.words.max(1).next_multiple_of(ALIGN_WORDS),
        );
        drop(block);
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .release(offset, len);
    }
}

/// Pinned memory that grows: arenas of at least `region_bytes` made as they
/// are needed and kept (the pinned masters of streamed objects, whose total
/// is known only as keys and diagonals are made). A block comes from the
/// first arena with room.
pub(crate) struct PinnedStore {
    ctx: Arc<CudaContext>,
    region_bytes: usize,
    arenas: Mutex<Vec<PinnedArena>>,
}

impl fmt::Debug for PinnedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedStore")
            .field("capacity", &self.capacity_bytes())
            .finish_non_exhaustive()
    }
}

impl PinnedStore {
    /// An empty store on `ctx` whose arenas are at least `region_bytes`.
    pub(crate) fn new(ctx: &Arc<CudaContext>, region_bytes: usize) -> Self {
        Self {
            ctx: Arc::clone(ctx),
            region_bytes,
            arenas: Mutex::new(Vec::new()),
        }
    }

    /// Bytes in the store's arenas.
    pub(crate) fn capacity_bytes(&self) -> u64 {
        self.arenas
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|a| a.capacity_bytes())
            .sum()
    }

    /// A block of at least `words` words.
    ///
    /// # Errors
    /// Driver errors of a new arena (out of pinned memory among them).
    pub(crate) fn allocate(&self, words: usize) -> Result<PinnedBlock> {
        let mut arenas = self.arenas.lock().unwrap_or_else(PoisonError::into_inner);
        for arena in arenas.iter() {
            if let Some(block) = arena.allocate(words) {
                return Ok(block);
            }
        }
        let bytes = words.saturating_mul(8).max(self.region_bytes);
        let arena = PinnedArena::new(&self.ctx, bytes)?;
        let block = arena.allocate(words).ok_or(Error::OutOfMemory {
            requested: words.saturating_mul(8),
            placement: crate::Placement::Streamed,
            class: crate::MemoryClass::Temporary,
        })?;
        arenas.push(arena);
        Ok(block)
    }

    /// Returns a block to the arena it came from.
    pub(crate) fn release(&self, block: PinnedBlock) {
        let arenas = self.arenas.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(arena) = arenas.iter().find(|a| a.owns(&block)) {
            arena.release(block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_list_is_first_fit_and_coalesces() {
        let mut f = FreeList::new(256);
        assert_eq!(f.allocate(64), Some(0));
        assert_eq!(f.allocate(128), Some(64));
        assert_eq!(f.allocate(128), None);
        assert_eq!(f.allocate(64), Some(192));
        f.release(0, 64);
        f.release(192, 64);
        assert_eq!(f.allocate(128), None, "not adjacent yet");
        f.release(64, 128);
        assert_eq!(f.free.len(), 1, "all three ranges merged");
        assert_eq!(f.allocate(256), Some(0));
    }
}
