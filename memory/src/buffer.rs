//! [`Buffer`], an owning handle to one allocation.

use std::fmt;
use std::sync::Arc;

use crate::{
    Allocation, AllocationId, DevicePtr, Error, Memory, MemoryClass, MemoryResource, Placement,
    Result, StreamId,
};

/// An owning handle to memory obtained from an [`crate::Allocator`]. Dropping it
/// returns the memory to the resource chain it came from (which zeroes it
/// first when it is sensitive, and frees device memory in order on its
/// stream). A zeroing that fails in a drop is reported by the allocator's
/// next fallible call; [`crate::Allocator::release`] zeroes a sensitive
/// buffer and returns the failure itself.
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

    /// The device address of a device buffer (`DevicePool` or `Managed`), for
    /// kernel launches; `None` for host placements. Valid while the buffer
    /// lives; work using it must be queued on [`Buffer::stream`] (or ordered
    /// after it with an event).
    pub fn device_ptr(&self) -> Option<DevicePtr> {
        self.allocation.memory.device().map(|d| d.ptr)
    }

    /// The stream a device buffer is ordered on; `None` for host placements.
    pub fn stream(&self) -> Option<StreamId> {
        self.allocation.stream()
    }

    /// The words of a host-accessible buffer (`Host`, `PinnedHost`).
    ///
    /// # Errors
    /// [`Error::WrongPlacement`] if the memory is not host-accessible.
    pub fn host_words(&self) -> Result<&[u64]> {
        match &self.allocation.memory {
            Memory::Host(words) => Ok(words),
            Memory::PinnedHost(block) => Ok(block.as_slice()),
            Memory::DevicePool(_) | Memory::Managed(_) | Memory::Streamed(_) => {
                Err(self.wrong_placement("host"))
            }
        }
    }

    /// The words of a host-accessible buffer, mutably.
    ///
    /// # Errors
    /// [`Error::WrongPlacement`] if the memory is not host-accessible.
    pub fn host_words_mut(&mut self) -> Result<&mut [u64]> {
        match &mut self.allocation.memory {
            Memory::Host(words) => Ok(words),
            Memory::PinnedHost(block) => Ok(block.as_mut_slice()),
            Memory::DevicePool(_) | Memory::Managed(_) | Memory::Streamed(_) => {
                Err(Error::WrongPlacement {
                    placement: self.allocation.placement,
                    wanted: "host",
                })
            }
        }
    }

    /// The pinned master copy of a streamed object.
    pub(crate) fn streamed_master_mut(&mut self) -> Option<&mut [u64]> {
        match &mut self.allocation.memory {
            Memory::Streamed(s) => Some(s.master.as_mut_slice()),
            _ => None,
        }
    }

    pub(crate) fn memory(&self) -> &Memory {
        &self.allocation.memory
    }

    /// Moves a device buffer to another stream (the caller has ordered the
    /// streams).
    pub(crate) fn set_stream(&mut self, stream: StreamId) {
        if let Memory::DevicePool(d) | Memory::Managed(d) = &mut self.allocation.memory {
            d.stream = stream;
        }
    }

    /// Records that the buffer's memory has been zeroed explicitly, so the
    /// resource need not zero it again when it is released.
    pub(crate) fn mark_wiped(&mut self) {
        self.allocation.wiped = true;
    }

    /// Whether `owner` is the chain this buffer came from.
    pub(crate) fn is_owned_by(&self, owner: &Arc<dyn MemoryResource>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.owner), Arc::as_ptr(owner))
    }

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
