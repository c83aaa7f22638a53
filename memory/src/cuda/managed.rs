//! Managed (unified) memory: `cuMemAllocManaged`, `cuMemAdvise`,
//! `cuMemPrefetchAsync` and `cuMemFree`, behind the `Managed` placement.
//!
//! CUDA 13 changed the advise and prefetch signatures to take a
//! `CUmemLocation` (`cuMemAdvise_v2`, `cuMemPrefetchAsync_v2` in cudarc's
//! bindings for `cuda-13000`). See
//! <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__UNIFIED.html>.

use cudarc::driver::result;
use cudarc::driver::sys::{
    self, CUmem_advise, CUmemAttach_flags, CUmemLocation, CUmemLocationType,
};

use super::GpuDevice;
use crate::error::driver;
use crate::{DevicePtr, Result, StreamId};

/// Where managed memory is prefetched to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Location {
    /// The GPU.
    Device,
    /// Host memory.
    Host,
}

impl GpuDevice {
    fn location(&self, location: Location) -> CUmemLocation {
        match location {
            Location::Device => CUmemLocation {
                type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: i32::try_from(self.ordinal()).unwrap_or(0),
            },
            Location::Host => CUmemLocation {
                type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
                id: 0,
            },
        }
    }

    /// Allocates `bytes` of managed memory attached globally.
    ///
    /// # Errors
    /// Driver errors (out of memory among them).
    pub(crate) fn allocate_managed(&self, bytes: usize) -> Result<DevicePtr> {
        self.bind()?;
        // SAFETY: the context is current; the memory is uninitialised and
        // only ever reached through device pointers and driver copies.
        let ptr = unsafe { result::malloc_managed(bytes, CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL) }
            .map_err(driver("cuMemAllocManaged"))?;
        Ok(DevicePtr(ptr))
    }

    /// Frees managed memory (`cuMemFree`). The caller has made sure no
    /// queued work still uses it (the managed resource waits for events on
    /// both streams first).
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn free_managed(&self, ptr: DevicePtr) -> Result<()> {
        self.bind()?;
        // SAFETY: ptr came from allocate_managed and is freed once, after the
        // events recorded behind its last uses completed.
        unsafe { result::memory_free(ptr.0) }.map_err(driver("cuMemFree"))
    }

    /// Sets or unsets read-mostly advice on a managed range.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn advise_read_mostly(&self, ptr: DevicePtr, bytes: usize, on: bool) -> Result<()> {
        let advice = if on {
            CUmem_advise::CU_MEM_ADVISE_SET_READ_MOSTLY
        } else {
            CUmem_advise::CU_MEM_ADVISE_UNSET_READ_MOSTLY
        };
        // The location is ignored for read-mostly advice.
        self.advise(ptr, bytes, advice, Location::Device)
    }

    /// Sets the preferred location of a managed range to this device.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn advise_preferred_device(&self, ptr: DevicePtr, bytes: usize) -> Result<()> {
        self.advise(
            ptr,
            bytes,
            CUmem_advise::CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
            Location::Device,
        )
    }

    fn advise(
        &self,
        ptr: DevicePtr,
        bytes: usize,
        advice: CUmem_advise,
        location: Location,
    ) -> Result<()> {
        self.bind()?;
        // SAFETY: ptr/bytes is exactly a live managed allocation; advice only
        // changes how the driver migrates it.
        unsafe { result::mem_advise(ptr.0, bytes, advice, self.location(location)) }
            .map_err(driver("cuMemAdvise"))
    }

    /// Queues a prefetch of a managed range to `to` on `stream`
    /// (`cuMemPrefetchAsync`, CUDA 13 signature with a location and flags 0).
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn prefetch(
        &self,
        ptr: DevicePtr,
        bytes: usize,
        to: Location,
        stream: StreamId,
    ) -> Result<()> {
        self.bind()?;
        let cu_stream = self.stream(stream).cu_stream();
        // SAFETY: ptr/bytes is a live managed allocation that is freed only
        // after events recorded on both streams complete, so after this
        // prefetch; migration does not change its contents.
        unsafe { sys::cuMemPrefetchAsync_v2(ptr.0, bytes, self.location(to), 0, cu_stream) }
            .result()
            .map_err(driver("cuMemPrefetchAsync"))
    }
}
