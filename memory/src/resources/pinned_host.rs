//! The `PinnedHost` placement: blocks of a pre-allocated pinned region.

use std::fmt;

use zeroize::Zeroize;

use crate::cuda::{GpuDevice, PinnedArena};
use crate::{AllocRequest, Allocation, Error, Memory, MemoryResource, Placement, Result};

/// Pinned host memory for explicit swaps, carved from one region allocated
/// up front (allocating pinned memory is slow: 90.9 ms for 256 MiB on the
/// H200). Blocks are host-accessible; sensitive blocks are zeroed when freed.
pub struct PinnedHostResource {
    arena: PinnedArena,
}

impl fmt::Debug for PinnedHostResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedHostResource")
            .field("capacity", &self.arena.capacity_bytes())
            .finish()
    }
}

impl PinnedHostResource {
    /// Allocates `bytes` of pinned memory on `gpu`'s context.
    ///
    /// # Errors
    /// Driver errors.
    pub fn new(gpu: &GpuDevice, bytes: u64) -> Result<Self> {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        Ok(Self {
            arena: PinnedArena::new(gpu.context(), bytes)?,
        })
    }

    /// Bytes in the arena.
    pub fn capacity_bytes(&self) -> u64 {
        self.arena.capacity_bytes()
    }
}

impl MemoryResource for PinnedHostResource {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        if request.bytes == 0 {
            return Err(Error::ZeroSize {
                class: request.class,
            });
        }
        let block = self
            .arena
            .allocate(request.bytes.div_ceil(8))
            .ok_or(Error::OutOfMemory {
                requested: request.bytes,
                placement: Placement::PinnedHost,
                class: request.class,
            })?;
        Ok(Allocation::new(
            request,
            Placement::PinnedHost,
            Memory::PinnedHost(block),
        ))
    }

    fn deallocate(&self, allocation: Allocation) {
        let zero = allocation.needs_zeroing();
        if let Memory::PinnedHost(mut block) = allocation.memory {
            if zero {
                block.as_mut_slice().zeroize();
            }
            self.arena.release(block);
        }
    }

    fn placement(&self, _request: &AllocRequest) -> Result<Option<Placement>> {
        Ok(Some(Placement::PinnedHost))
    }
}
