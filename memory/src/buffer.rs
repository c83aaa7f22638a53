//! [`Buffer`], an owning handle to one allocation.

use std::fmt;
use std::sync::Arc;

use crate::{
    Allocation, AllocationId, Error, Memory, MemoryClass, MemoryResource, Placement, Result,
};

/// An owning handle to memory obtained from an [`crate::Allocator`]. Dropping it
/// returns the memory to the resource chain it came from (which zeroes it
/// first when it is sensitive).
pub struct Buffer {
    allocation: Allocation,
    owner: Arc<dyn MemoryResource>,
}

impl Buffer {
    pub(crate) fn new(allocation: Allocation, owner: Arc<dyn MemoryResource>) -> Self {
        Self { allocation, owner }
    }

    /// The allocation's id.
    pub fn id(&self) -> AllocationId {
        self.allocation.id
    }

    /// Bytes requested.
    pub fn bytes(&self) -> usize {
        self.allocation.bytes
    }

    /// Whole 64-bit words available.
    pub fn words(&self) -> usize {
        self.allocation.bytes / 8
    }

    /// The class of the data.
    pub fn class(&self) -> MemoryClass {
        self.allocation.class
    }

    /// Where the memory lives.
    pub fn placement(&self) -> Placement {
        self.allocation.placement
    }

    /// Whether the buffer holds secret-key material.
    pub fn is_sensitive(&self) -> bool {
        self.allocation.sensitive
    }

    /// The words of a host-accessible buffer.
    ///
    /// # Errors
    /// [`Error::WrongPlacement`] if the memory is not host-accessible.
    pub fn host_words(&self) -> Result<&[u64]> {
        match &self.allocation.memory {
            Memory::Host(words) => Ok(words),
        }
    }

    /// The words of a host-accessible buffer, mutably.
    ///
    /// # Errors
    /// [`Error::WrongPlacement`] if the memory is not host-accessible.
    pub fn host_words_mut(&mut self) -> Result<&mut [u64]> {
        match &mut self.allocation.memory {
            Memory::Host(words) => Ok(words),
        }
    }

    #[allow(dead_code, reason = "used once device placements exist")]
    fn wrong_placement(&self, wanted: &'static str) -> Error {
        Error::WrongPlacement {
            placement: self.placement(),
            wanted,
        }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("id", &self.allocation.id)
            .field("bytes", &self.allocation.bytes)
            .field("class", &self.allocation.class)
            .field("placement", &self.allocation.placement)
            .finish_non_exhaustive()
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.owner.deallocate(self.allocation.take());
    }
}
