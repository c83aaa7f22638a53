//! The paged pool: device memory mapped page by page into one reserved
//! address range (`cuMemAddressReserve`, `cuMemCreate`, `cuMemMap`), so
//! that any free page can back any new block and a request the budget has
//! room for never fails for want of a contiguous hole.
//!
//! The driver's stream-ordered pool (`cuMemPoolCreate`) reserves memory in
//! chunks and places blocks inside them; under a hard cap its free memory
//! can lie in pieces none of which holds the next block (FVb under 2 GiB:
//! a 36.7 MB request refused with 0.66–0.73 GB free, docs/GPU-PERF.md). A
//! page here is 2 MiB, the driver's granularity; blocks of more than half a
//! page take whole pages ([`book`]), smaller ones share one-page slabs
//! ([`slab`]). Freed memory stays mapped for reuse in stream order until the
//! cap or a trim needs its pages.
//!
//! See the CUDA driver API, "Virtual Memory Management":
//! <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html>

mod book;
mod runs;
mod slab;

use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::{
    self, CUdevice_attribute, CUmemAccess_flags, CUmemAccessDesc, CUmemAllocationGranularity_flags,
    CUmemAllocationHandleType, CUmemAllocationProp, CUmemAllocationType,
    CUmemGenericAllocationHandle, CUmemLocation, CUmemLocationType, CUresult,
};

use self::book::{Book, PageDriver, nanos_since};
use self::slab::Slabs;
use super::PoolAllocError;
use crate::cuda::{Event, GpuDevice};
use crate::error::driver;
use crate::{DeviceError, DeviceMemory, DevicePtr, PoolActivity, Result, StreamId};

/// The page size when the driver's granularity is smaller (it is 2 MiB on
/// the GPUs measured).
const MIN_PAGE: u64 = 2 << 20;

/// Pages a physical allocation holds: one. `cuMemMap` of part of a larger
/// allocation (a non-zero offset) returned `CUDA_ERROR_NOT_SUPPORTED` on the
/// H100 with driver 580.159.04, so every page is an allocation of its own,
/// mapped whole.
const HANDLE_PAGES: u64 = 1;

/// The reserved range is this many times the cap: pages remapped to fresh
/// addresses leave holes behind, and addresses cost nothing.
const RANGE_FACTOR: u64 = 4;

/// The driver calls of the book, on one device's reserved range.
struct CudaPages {
    gpu: GpuDevice,
    base: u64,
    location: CUmemLocation,
}

/// The properties of the pool's physical pages: pinned device memory at
/// `location`, no exportable handle.
fn properties(location: CUmemLocation) -> CUmemAllocationProp {
    // SAFETY: CUmemAllocationProp is a plain C struct of enums whose zero
    // value is valid, a null pointer and reserved bytes; all-zero is its
    // documented default before filling fields.
    let mut prop: CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
    prop.location = location;
    prop
}

impl PageDriver for CudaPages {
    type Handle = CUmemGenericAllocationHandle;
    type Event = Event;

    fn create(&self, bytes: u64) -> Result<Option<Self::Handle>> {
        let prop = properties(self.location);
        let mut handle: CUmemGenericAllocationHandle = 0;
        let size = usize::try_from(bytes).unwrap_or(usize::MAX);
        // SAFETY: `handle` and `prop` are valid for the call; `size` is a
        // multiple of the granularity (whole pages).
        match unsafe { sys::cuMemCreate(&raw mut handle, size, &raw const prop, 0) } {
            CUresult::CUDA_SUCCESS => Ok(Some(handle)),
            CUresult::CUDA_ERROR_OUT_OF_MEMORY => Ok(None),
            e => Err(driver("cuMemCreate")(cudarc::driver::DriverError(e))),
        }
    }

    fn release(&self, handle: Self::Handle) -> Result<()> {
        // SAFETY: the handle came from cuMemCreate and none of its pages is
        // mapped any more (the book unmaps them first); released once.
        unsafe { sys::cuMemRelease(handle) }
            .result()
            .map_err(driver("cuMemRelease"))
    }

    fn map(&self, va: u64, handle: Self::Handle, offset: u64, bytes: u64) -> Result<()> {
        let size = usize::try_from(bytes).unwrap_or(usize::MAX);
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        // SAFETY: [base + va, + bytes) lies in the reserved range and is
        // mapped to nothing (the book maps only unmapped pages); the handle
        // holds [offset, offset + bytes).
        unsafe { sys::cuMemMap(self.base + va, size, offset, handle, 0) }
            .result()
            .map_err(driver("cuMemMap"))
    }

    fn grant(&self, va: u64, bytes: u64) -> Result<()> {
        let desc = CUmemAccessDesc {
            location: self.location,
            flags: CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        let size = usize::try_from(bytes).unwrap_or(usize::MAX);
        // SAFETY: the range is fully mapped (the book grants after mapping
        // every page of it); `desc` is valid for the call.
        unsafe { sys::cuMemSetAccess(self.base + va, size, &raw const desc, 1) }
            .result()
            .map_err(driver("cuMemSetAccess"))
    }

    fn unmap(&self, va: u64, bytes: u64) -> Result<()> {
        let size = usize::try_from(bytes).unwrap_or(usize::MAX);
        // SAFETY: [base + va, + bytes) is one whole mapping (one page) of
        // no live block, and the frees it waited for are complete, so no
        // queued work reads it.
        unsafe { sys::cuMemUnmap(self.base + va, size) }
            .result()
            .map_err(driver("cuMemUnmap"))
    }

    fn record(&self, stream: StreamId) -> Result<Event> {
        self.gpu.record_event(stream)
    }

    fn is_complete(&self, event: &Event) -> Result<bool> {
        event.is_complete()
    }

    fn synchronize(&self, event: &Event) -> Result<()> {
        event.synchronize()
    }

    fn wait(&self, stream: StreamId, event: &Event) -> Result<()> {
        self.gpu.wait_event(stream, event)
    }
}

/// What the lock guards.
struct State {
    book: Book<CudaPages>,
    slabs: Slabs,
}

/// A pool of device memory mapped page by page (see the module
/// documentation), holding at most its cap.
pub(crate) struct PagedPool {
    gpu: GpuDevice,
    base: u64,
    range: u64,
    page: u64,
    state: Mutex<State>,
}

impl fmt::Debug for PagedPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PagedPool")
            .field("device", &self.gpu.ordinal())
            .field("page", &self.page)
            .finish_non_exhaustive()
    }
}

impl PagedPool {
    /// The page size on `gpu`: the driver's minimum granularity for pinned
    /// device memory, at least 2 MiB.
    ///
    /// # Errors
    /// [`DeviceError::PoolsUnsupported`] when the device has no virtual
    /// memory management; driver errors.
    fn page_bytes(gpu: &GpuDevice) -> Result<u64> {
        gpu.bind()?;
        let supported = gpu
            .context()
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
            .map_err(driver("cuDeviceGetAttribute"))?;
        if supported == 0 {
            return Err(DeviceError::PoolsUnsupported {
                ordinal: gpu.ordinal(),
            }
            .into());
        }
        let prop = properties(location(gpu));
        let mut granularity: usize = 0;
        // SAFETY: both pointers are valid for the call.
        unsafe {
            sys::cuMemGetAllocationGranularity(
                &raw mut granularity,
                &raw const prop,
                CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        }
        .result()
        .map_err(driver("cuMemGetAllocationGranularity"))?;
        let granularity = (granularity as u64).max(1);
        Ok(MIN_PAGE.div_ceil(granularity) * granularity)
    }

    /// A pool on `gpu` that never holds more than `max_bytes` (rounded down
    /// to whole pages, at least one).
    ///
    /// # Errors
    /// As [`PagedPool::page_bytes`]; driver errors of reserving the range.
    pub(crate) fn create(gpu: &GpuDevice, max_bytes: u64) -> Result<Self> {
        let page = Self::page_bytes(gpu)?;
        let cap = (max_bytes / page).max(1);
        let va_pages = cap.saturating_mul(RANGE_FACTOR);
        let range = va_pages * page;
        let mut base: sys::CUdeviceptr = 0;
        let size = usize::try_from(range).unwrap_or(usize::MAX);
        let align = usize::try_from(page).unwrap_or(usize::MAX);
        // SAFETY: `base` is valid for the call; a reservation maps nothing.
        unsafe { sys::cuMemAddressReserve(&raw mut base, size, align, 0, 0) }
            .result()
            .map_err(driver("cuMemAddressReserve"))?;
        let pages = CudaPages {
            gpu: gpu.clone(),
            base,
            location: location(gpu),
        };
        Ok(Self {
            gpu: gpu.clone(),
            base,
            range,
            page,
            state: Mutex::new(State {
                book: Book::new(pages, page, cap, va_pages, HANDLE_PAGES),
                slabs: Slabs::default(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The page size.
    pub(crate) fn page(&self) -> u64 {
        self.page
    }

    /// Allocates `bytes`, ordered on `stream`.
    pub(crate) fn allocate(
        &self,
        bytes: usize,
        stream: StreamId,
    ) -> std::result::Result<DeviceMemory, PoolAllocError> {
        self.gpu.bind().map_err(PoolAllocError::Other)?;
        let started = std::time::Instant::now();
        let bytes = bytes as u64;
        let mut state = self.lock();
        let State { book, slabs } = &mut *state;
        let offset = if Slabs::is_small(bytes, self.page) {
            slabs.allocate(book, self.page, bytes, stream)
        } else {
            book.allocate(bytes.div_ceil(self.page), stream)
                .map(|first| first.map(|p| p * self.page))
        };
        book.add_host_ns(nanos_since(started));
        match offset {
            Ok(Some(offset)) => Ok(DeviceMemory {
                ptr: DevicePtr(self.base + offset),
                stream,
            }),
            Ok(None) => Err(PoolAllocError::OutOfMemory),
            Err(e) => Err(PoolAllocError::Other(e)),
        }
    }

    /// Zeroes `bytes` of `memory` in order on its stream
    /// (`cuMemsetD8Async`), queued before its free.
    ///
    /// # Errors
    /// Driver errors of queueing the memset.
    pub(crate) fn zero(&self, memory: DeviceMemory, bytes: usize) -> Result<()> {
        self.gpu.zero_memory(memory, bytes)
    }

    /// Frees `memory` in order on its stream. Errors are kept by the device
    /// handle; a block whose free could not be recorded is never reused.
    pub(crate) fn free(&self, memory: DeviceMemory) {
        let run = || -> Result<()> {
            self.gpu.bind()?;
            let started = std::time::Instant::now();
            let offset = memory.ptr.0.wrapping_sub(self.base);
            let mut state = self.lock();
            let State { book, slabs } = &mut *state;
            let freed = match slabs.free(book, self.page, offset) {
                Ok(false) if offset.is_multiple_of(self.page) => {
                    book.free(offset / self.page, memory.stream).map(|_| ())
                }
                other => other.map(|_| ()),
            };
            book.add_host_ns(nanos_since(started));
            freed
        };
        self.gpu.defer(run());
    }

    /// Gives pages beyond `keep` bytes back to the device; returns the bytes
    /// held after.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn trim_to(&self, keep: u64) -> Result<u64> {
        self.gpu.bind()?;
        self.lock().book.trim_to(keep)
    }

    /// Bytes held from the device (live blocks and freed pages still
    /// mapped).
    pub(crate) fn reserved(&self) -> u64 {
        self.lock().book.held_bytes()
    }

    /// The most bytes held at once.
    pub(crate) fn reserved_high(&self) -> u64 {
        self.lock().book.high_bytes()
    }

    /// What the pool has done so far.
    pub(crate) fn activity(&self) -> PoolActivity {
        self.lock().book.activity()
    }
}

fn location(gpu: &GpuDevice) -> CUmemLocation {
    CUmemLocation {
        type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: i32::try_from(gpu.ordinal()).unwrap_or(0),
    }
}

impl Drop for PagedPool {
    fn drop(&mut self) {
        let run = || -> Result<()> {
            self.gpu.bind()?;
            // Every queued use of the pool's memory must be done before its
            // pages are unmapped.
            self.gpu.synchronize(StreamId::Compute)?;
            self.gpu.synchronize(StreamId::Copy)?;
            let torn = self.lock().book.teardown();
            let size = usize::try_from(self.range).unwrap_or(usize::MAX);
            // SAFETY: the range was reserved by create and nothing is mapped
            // in it any more; freed once.
            let freed = unsafe { sys::cuMemAddressFree(self.base, size) }
                .result()
                .map_err(driver("cuMemAddressFree"));
            torn.and(freed)
        };
        self.gpu.defer(run());
    }
}
