//! The `DevicePool` placement: the library's own stream-ordered pool.
//!
//! This resource only allocates and frees. What its blocks cost the budget
//! is counted by the [`BudgetAdaptor`](crate::BudgetAdaptor) above it: the
//! adaptor reserves a request's bytes before the pool sees it, gives them
//! back when the pool refuses or the block is freed, and reads what the pool
//! really holds from the driver ([`MemoryResource::held_bytes`]: the pool
//! reserves in chunks, so it can hold more than it hands out).

use std::fmt;
use std::sync::Arc;

use crate::cuda::{GpuDevice, Pool, PoolAllocError};
use crate::resource::ZeroingFailures;
use crate::{AllocRequest, Allocation, Error, Memory, MemoryResource, Placement, Result};

/// Stream-ordered device memory from the library's own pool (pages mapped
/// into one reserved range, or the driver's `cuMemAllocFromPoolAsync` /
/// `cuMemFreeAsync`; see `HEMEM_DEVICE_POOL`), allocated and freed in the
/// request's stream order, freed memory kept for reuse. The
/// device budget is not this resource's concern: the budget adaptor counts
/// its blocks, and the residency manager trims the pool when the budget
/// needs room.
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
    /// A resource over `pool` (created on `gpu`).
    pub(crate) fn new(gpu: &GpuDevice, pool: Arc<Pool>, zeroing: ZeroingFailures) -> Self {
        Self {
            pool,
            limit: usize::try_from(gpu.info().total_bytes).unwrap_or(usize::MAX),
            zeroing,
        }
    }
}

impl DevicePoolResource {
    /// Refuses a zero-byte request and one larger than the device.
    fn check(&self, request: &AllocRequest) -> Result<()> {
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
        Ok(())
    }
}

impl MemoryResource for DevicePoolResource {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        self.check(request)?;
        match self.pool.allocate(request.bytes, request.stream) {
            Ok(memory) => Ok(Allocation::new(
                request,
                Placement::DevicePool,
                Memory::DevicePool(memory),
            )),
            Err(PoolAllocError::OutOfMemory) => Err(Error::OutOfMemory {
                requested: request.bytes,
                placement: Placement::DevicePool,
                class: request.class,
            }),
            Err(PoolAllocError::Other(e)) => Err(e),
        }
    }

    fn deallocate(&self, allocation: Allocation) {
        if let Memory::DevicePool(memory) = allocation.memory {
            if allocation.needs_zeroing()
                && let Err(cause) = self.pool.zero(memory, allocation.bytes)
            {
                // Never hand secret words to the next owner: the block stays
                // allocated (in the pool's reservation, which the budget
                // reads) and the failure is reported.
                self.zeroing
                    .record(Placement::DevicePool, allocation.bytes, cause);
                return;
            }
            self.pool.free(memory);
        }
    }

    /// The pool; a zero-byte request or one larger than the device is
    /// refused here, as [`MemoryResource::allocate`] would refuse it.
    fn placement(&self, request: &AllocRequest) -> Result<Option<Placement>> {
        self.check(request)?;
        Ok(Some(Placement::DevicePool))
    }

    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        (placement == Placement::DevicePool)
            .then(|| self.pool.reserved().ok())
            .flatten()
    }
}
