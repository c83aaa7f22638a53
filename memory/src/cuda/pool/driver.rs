//! The driver's stream-ordered memory pool (`cuMemPoolCreate`), one of the
//! two pools behind the `DevicePool` placement.
//!
//! See the CUDA driver API, "Stream Ordered Memory Allocator":
//! <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html>

use std::ffi::c_void;
use std::fmt;

use cudarc::driver::sys::{
    self, CUmemAllocationHandleType, CUmemAllocationType, CUmemLocation, CUmemLocationType,
    CUmemPool_attribute, CUmemPoolProps, CUmemoryPool, CUresult,
};
use cudarc::driver::{DriverError, result};

use super::{POOL_CHUNK, PoolAllocError};
use crate::cuda::GpuDevice;
use crate::error::driver;
use crate::{DeviceError, DeviceMemory, DevicePtr, Result, StreamId};

/// A memory pool on one device whose release threshold is the maximum, so
/// freed memory stays in the pool (a pooled allocation + free costs about a
/// microsecond instead of `cudaMalloc`'s 141 µs, measured on the H200) until
/// [`DriverPool::trim_to`] gives it back.
pub(crate) struct DriverPool {
    raw: CUmemoryPool,
    gpu: GpuDevice,
}

// SAFETY: a CUmemoryPool handle may be used from any thread; the driver
// serialises pool operations internally. The handle is destroyed once, in Drop.
unsafe impl Send for DriverPool {}
// SAFETY: as above; &Pool only passes the handle to thread-safe driver calls.
unsafe impl Sync for DriverPool {}

impl fmt::Debug for DriverPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DriverPool")
            .field("device", &self.gpu.ordinal())
            .finish_non_exhaustive()
    }
}

impl DriverPool {
    /// Creates a pool of pinned device memory on `gpu` that never holds more
    /// than `max_bytes` (rounded down to whole 32 MiB chunks), with release
    /// threshold `u64::MAX`.
    ///
    /// # Errors
    /// [`DeviceError::PoolsUnsupported`]; driver errors of
    /// `cuMemPoolCreate`/`cuMemPoolSetAttribute`.
    pub(crate) fn create(gpu: &GpuDevice, max_bytes: u64) -> Result<Self> {
        if !gpu.info().memory_pools {
            return Err(DeviceError::PoolsUnsupported {
                ordinal: gpu.ordinal(),
            }
            .into());
        }
        gpu.bind()?;
        let location = CUmemLocation {
            type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: i32::try_from(gpu.ordinal()).unwrap_or(0),
        };
        // SAFETY: CUmemPoolProps is a plain C struct of integers, enums whose
        // zero value is valid (INVALID / NONE), a null pointer and reserved
        // bytes; all-zero is its documented default before filling fields.
        let mut props: CUmemPoolProps = unsafe { std::mem::zeroed() };
        props.allocType = CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        props.handleTypes = CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
        props.location = location;
        props.maxSize = usize::try_from(Self::cap(max_bytes)).unwrap_or(usize::MAX);
        // SAFETY: props is a valid, initialised CUmemPoolProps that outlives
        // the call; the context is current.
        let raw = unsafe { result::mem_pool::create(&props) }.map_err(driver("cuMemPoolCreate"))?;
        let pool = Self {
            raw,
            gpu: gpu.clone(),
        };
        let mut threshold: u64 = u64::MAX;
        // SAFETY: the pool is valid; RELEASE_THRESHOLD takes a cuuint64_t,
        // which `threshold` is, alive for the call.
        unsafe {
            result::mem_pool::set_attribute(
                pool.raw,
                CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&raw mut threshold).cast::<c_void>(),
            )
        }
        .map_err(driver("cuMemPoolSetAttribute"))?;
        Ok(pool)
    }

    /// The most a pool asked to hold at most `max_bytes` can be held to:
    /// the pool reserves from the device in chunks of up to 32 MiB and was
    /// measured (H100) to reach the next whole chunk above a maximum between
    /// two, so the maximum is rounded down to whole chunks (2 MiB below
    /// 64 MiB). Never zero, which means "no limit" to the driver.
    pub(crate) fn cap(max_bytes: u64) -> u64 {
        let chunk = if max_bytes >= 2 * POOL_CHUNK {
            POOL_CHUNK
        } else {
            2 << 20
        };
        (max_bytes - max_bytes % chunk).max(2 << 20)
    }

    /// Allocates `bytes` from the pool, ordered on `stream`.
    pub(crate) fn allocate(
        &self,
        bytes: usize,
        stream: StreamId,
    ) -> std::result::Result<DeviceMemory, PoolAllocError> {
        self.gpu.bind().map_err(PoolAllocError::Other)?;
        let cu_stream = self.gpu.stream(stream).cu_stream();
        // SAFETY: the pool and the stream belong to this device's context,
        // which is current; the returned memory is uninitialised device
        // memory that no host reference ever aliases.
        match unsafe { result::mem_pool::alloc_async(self.raw, bytes, cu_stream) } {
            Ok(ptr) => Ok(DeviceMemory {
                ptr: DevicePtr(ptr),
                stream,
            }),
            Err(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY)) => {
                Err(PoolAllocError::OutOfMemory)
            }
            Err(e) => Err(PoolAllocError::Other(driver("cuMemAllocFromPoolAsync")(e))),
        }
    }

    /// Zeroes `bytes` of `memory` in order on its stream
    /// (`cuMemsetD8Async`): queued before the block's free, so the pool
    /// hands the block out again only after the zeros are written.
    ///
    /// # Errors
    /// Driver errors of queueing the memset (a fault while it runs leaves
    /// the context unusable, and every later driver call returns it).
    pub(crate) fn zero(&self, memory: DeviceMemory, bytes: usize) -> Result<()> {
        self.gpu.zero_memory(memory, bytes)
    }

    /// Frees `memory` in order on its stream (`cuMemFreeAsync`). Errors are
    /// kept by the device handle.
    ///
    /// `memory` must come from [`DriverPool::allocate`] of this pool and must not
    /// be freed twice: the pool resource guarantees this by freeing only
    /// allocations it handed out, each once.
    pub(crate) fn free(&self, memory: DeviceMemory) {
        let run = || -> Result<()> {
            self.gpu.bind()?;
            let cu_stream = self.gpu.stream(memory.stream).cu_stream();
            // SAFETY: memory.ptr came from this pool on this stream and is
            // freed exactly once; everything using it (a zeroing memset
            // among it) was queued on this stream, or ordered before it with
            // an event, earlier.
            unsafe { result::free_async(memory.ptr.0, cu_stream) }.map_err(driver("cuMemFreeAsync"))
        };
        self.gpu.defer(run());
    }

    /// Gives memory the pool holds beyond `keep` bytes back to the device
    /// (`cuMemPoolTrimTo`); returns the bytes it reserves afterwards.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn trim_to(&self, keep: u64) -> Result<u64> {
        self.gpu.bind()?;
        // SAFETY: the pool is valid; trimming only releases unused memory.
        unsafe { result::mem_pool::trim_to(self.raw, usize::try_from(keep).unwrap_or(usize::MAX)) }
            .map_err(driver("cuMemPoolTrimTo"))?;
        self.reserved()
    }

    /// Bytes the pool holds from the device (live allocations and cached
    /// free memory).
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn reserved(&self) -> Result<u64> {
        self.attribute(CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
    }

    /// The most bytes the pool has held from the device at once
    /// (`CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH`): the driver's own record of the
    /// device footprint, independent of hemem's accounting.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn reserved_high(&self) -> Result<u64> {
        self.attribute(CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
    }

    fn attribute(&self, attribute: CUmemPool_attribute) -> Result<u64> {
        self.gpu.bind()?;
        let mut value: u64 = 0;
        // SAFETY: the pool is valid; the *_MEM_CURRENT attributes are
        // cuuint64_t, which `value` is, alive for the call.
        unsafe {
            result::mem_pool::get_attribute(self.raw, attribute, (&raw mut value).cast::<c_void>())
        }
        .map_err(driver("cuMemPoolGetAttribute"))?;
        Ok(value)
    }
}

impl Drop for DriverPool {
    fn drop(&mut self) {
        let run = || -> Result<()> {
            self.gpu.bind()?;
            // SAFETY: the pool is destroyed once. Allocations still pending a
            // stream-ordered free are released by the driver once their
            // frees complete (cuMemPoolDestroy's documented behaviour).
            unsafe { sys::cuMemPoolDestroy(self.raw) }
                .result()
                .map_err(driver("cuMemPoolDestroy"))
        };
        self.gpu.defer(run());
    }
}
