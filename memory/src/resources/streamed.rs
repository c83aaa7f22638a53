//! The `Streamed` placement: read-only objects of the `planned` policy.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::cuda::{GpuDevice, PinnedStore};
use crate::residency::Residency;
use crate::resource::StreamedMemory;
use crate::{AllocRequest, Allocation, Error, Memory, MemoryResource, Placement, Result};

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
        let master = self.store.allocate(request.bytes.div_ceil(8))?;
        let slot = Arc::new(AtomicU64::new(0));
        self.residency.register_streamed(
            request.id,
            request.class,
            request.bytes as u64,
            master.addr(),
            Arc::clone(&slot),
        );
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
        self.store.release(memory.master);
    }

    fn placement(&self, _request: &AllocRequest) -> Result<Option<Placement>> {
        Ok(Some(Placement::Streamed))
    }
}
