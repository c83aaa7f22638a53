//! The `DevicePool` placement: the library's own stream-ordered pool.

use std::fmt;
use std::sync::Arc;

use crate::cuda::{GpuDevice, Pool, PoolAllocError};
use crate::residency::Residency;
use crate::resource::ZeroingFailures;
use crate::{AllocRequest, Allocation, Error, Memory, MemoryResource, Placement, Result};

/// Stream-ordered device memory from the library's own pool
/// (`cuMemAllocFromPoolAsync` / `cuMemFreeAsync` on the request's stream;
/// release threshold at the maximum, so freed memory stays pooled). Every
/// allocation first reserves room under the device budget; the pool is
/// trimmed by the residency manager when the budget needs room.
///
/// Thread-safe. Memory is freed in order on its stream, after everything
/// queued there before the free; sensitive memory is zeroed on that stream
/// first (`cuMemsetD8Async`), so the pool hands it out again, in stream
/// order, only after the zeroing. A zeroing the driver refuses keeps the
/// block out of the pool (it is never freed) and is reported by the
/// allocator's next fallible call. Using a block on the other stream needs an
/// event (`Allocator::hand_over`).
pub struct DevicePoolResource {
    pool: Arc<Pool>,
    residency: Arc<Residency>,
    limit: usize,
    zeroing: ZeroingFailures,
}

impl fmt::Debug for DevicePoolResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DevicePoolResource")
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl DevicePoolResource {
    /// A resource over `pool` (created on `gpu`) whose bytes count against
    /// `residency`'s budget.
    pub(crate) fn new(
        gpu: &GpuDevice,
        pool: Arc<Pool>,
        residency: Arc<Residency>,
        zeroing: ZeroingFailures,
    ) -> Self {
        Self {
            pool,
            residency,
            limit: usize::try_from(gpu.info().total_bytes).unwrap_or(usize::MAX),
            zeroing,
        }
    }
}

impl MemoryResource for DevicePoolResource {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        if request.bytes == 0 {
            return Err(Error::ZeroSize {
                class: request.class,
            });
        }
        if request.bytes > self.limit {
            return Err(Error::TooLarge {
                requested: request.bytes,
                limit: self.limit,
                class: request.class,
            });
        }
        let bytes = request.bytes as u64;
        self.residency.reserve_pool(request.class, bytes)?;
        match self.pool.allocate(request.bytes, request.stream) {
            Ok(memory) => {
                // The pool reserves from the device in chunks, so what it
                // holds can exceed the bytes handed out: the budget counts
                // what it really holds.
                if let Ok(held) = self.pool.reserved() {
                    self.residency.observe_pool(held);
                }
                Ok(Allocation::new(
                    request,
                    Placement::DevicePool,
                    Memory::DevicePool(memory),
                ))
            }
            Err(e) => {
                self.residency.release_pool(request.class, bytes);
                Err(match e {
                    PoolAllocError::OutOfMemory => Error::OutOfMemory {
                        requested: request.bytes,
                        placement: Placement::DevicePool,
                        class: request.class,
                    },
                    PoolAllocError::Other(e) => e,
                })
            }
        }
    }

    fn deallocate(&self, allocation: Allocation) {
        if let Memory::DevicePool(memory) = allocation.memory {
            if allocation.needs_zeroing()
                && let Err(cause) = self.pool.zero(memory, allocation.bytes)
            {
                // Never hand secret words to the next owner: the block stays
                // allocated (and counted) and the failure is reported.
                self.zeroing
                    .record(Placement::DevicePool, allocation.bytes, cause);
                return;
            }
            self.pool.free(memory);
            self.residency
                .release_pool(allocation.class, allocation.bytes as u64);
        }
    }
}
