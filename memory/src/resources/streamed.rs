//! The `Streamed` placement: read-only objects of the `planned` policy.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

use crate::cuda::{GpuDevice, PinnedArena, PinnedStore};
use crate::residency::Residency;
use crate::resource::StreamedMemory;
use crate::{
    AllocRequest, Allocation, AllocationId, Error, Memory, MemoryResource, Placement, Result,
};

/// Pinned arenas are made this large at least (allocating pinned memory is
/// slow: 90.9 ms for 256 MiB on the H200, so a few large regions).
const REGION_BYTES: usize = 512 << 20;

/// Streamed objects: each has a master copy in pinned host memory, from
/// arenas allocated as the objects are made and kept, and a device slot
/// that the [`Residency`] manager gives it while it is resident (see
/// `residency::streamed`). Sensitive requests are refused: secret material
/// stays in the pool.
pub struct StreamedResource {
    store: PinnedStore,
    residency: Arc<Residency>,
    /// The arena of each live block, to give it back to.
    owners: Mutex<HashMap<AllocationId, Arc<PinnedArena>>>,
}

impl fmt::Debug for StreamedResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamedResource")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl StreamedResource {
    /// A resource on `gpu` whose objects `residency` keeps on the device.
    pub(crate) fn new(gpu: &GpuDevice, residency: Arc<Residency>) -> Self {
        Self {
            store: PinnedStore::new(gpu.context(), REGION_BYTES),
            residency,
            owners: Mutex::new(HashMap::new()),
        }
    }

    /// Bytes of pinned memory held for masters.
    pub fn pinned_bytes(&self) -> u64 {
        self.store.capacity_bytes()
    }
}

impl MemoryResource for StreamedResource {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        if request.bytes == 0 {
            return Err(Error::ZeroSize {
                class: request.class,
            });
        }
        if request.sensitive {
            return Err(Error::PlacementUnavailable {
                placement: Placement::Streamed,
            });
        }
        let (master, arena) = self.store.allocate(request.bytes.div_ceil(8))?;
        let slot = Arc::new(AtomicU64::new(0));
        self.residency.register_streamed(
            request.id,
            request.class,
            request.bytes as u64,
            master.addr(),
            Arc::clone(&slot),
        );
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(request.id, arena);
        Ok(Allocation::new(
            request,
            Placement::Streamed,
            Memory::Streamed(StreamedMemory { master, slot }),
        ))
    }

    fn deallocate(&self, allocation: Allocation) {
        let Memory::Streamed(memory) = allocation.memory else {
            return;
        };
        self.residency.unregister_streamed(allocation.id);
        let arena = self
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&allocation.id);
        if let Some(arena) = arena {
            arena.release(memory.master);
        }
    }
}
