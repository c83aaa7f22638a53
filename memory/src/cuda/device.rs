//! [`GpuDevice`]: one GPU, its context and its two streams.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags, CUresult};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, DriverError};

use super::probe::driver_present;
use super::transfer::Staging;
use crate::error::driver;
use crate::{DeviceError, DriverVersion, Error, Result, StreamId};

/// A compute capability, `major.minor` (7.5 for Turing, 9.0 for Hopper).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeCapability {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl ComputeCapability {
    /// The lowest capability nvcc 13 targets (Turing).
    pub const MIN: Self = Self { major: 7, minor: 5 };
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What a GPU is and can do, read once when it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device ordinal.
    pub ordinal: usize,
    /// The device's name (`NVIDIA H200`).
    pub name: String,
    /// Its compute capability.
    pub compute_capability: ComputeCapability,
    /// Total device memory in bytes.
    pub total_bytes: u64,
    /// Free device memory in bytes when the device was opened.
    pub free_bytes_at_open: u64,
    /// The driver's CUDA version.
    pub driver_version: DriverVersion,
    /// Whether the CPU and GPU may access managed memory concurrently (needed
    /// for the managed placement, prefetching and eviction).
    pub concurrent_managed_access: bool,
    /// Whether stream-ordered memory pools are supported.
    pub memory_pools: bool,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
}

/// Free and total device memory, from `cuMemGetInfo`.
///
/// Pooled memory shows here (and leaves on a pool trim); managed memory
/// prefetched back to the host does not (the driver keeps its device pages
/// cached), so this cannot check residency — CUPTI's counters can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Free bytes.
    pub free: u64,
    /// Total bytes.
    pub total: u64,
}

/// A recorded point in a stream's work, for ordering and timing.
#[derive(Debug)]
pub struct Event(pub(crate) CudaEvent);

impl Event {
    /// Blocks the calling thread until the recorded work is done.
    ///
    /// # Errors
    /// [`DeviceError::Driver`].
    pub fn synchronize(&self) -> Result<()> {
        self.0.synchronize().map_err(driver("cuEventSynchronize"))
    }

    /// Whether the recorded work is done (never blocks).
    ///
    /// # Errors
    /// [`DeviceError::Driver`] for errors of earlier asynchronous work.
    pub fn is_complete(&self) -> Result<bool> {
        self.0.try_is_complete().map_err(driver("cuEventQuery"))
    }

    /// Milliseconds from this event to `end` (both must come from
    /// [`GpuDevice::record_timing_event`]); waits for both.
    ///
    /// # Errors
    /// [`DeviceError::Driver`].
    pub fn elapsed_ms(&self, end: &Self) -> Result<f32> {
        self.0
            .elapsed_ms(&end.0)
            .map_err(driver("cuEventElapsedTime"))
    }

    /// The raw `CUevent`, for launchers that pass events to the driver. It
    /// stays owned by this value.
    pub fn cu_event(&self) -> cudarc::driver::sys::CUevent {
        self.0.cu_event()
    }
}

pub(super) struct Inner {
    ctx: Arc<CudaContext>,
    compute: Arc<CudaStream>,
    copy: Arc<CudaStream>,
    info: DeviceInfo,
    deferred: Mutex<Option<Error>>,
    pub(super) staging: Mutex<Option<Staging>>,
}

/// One GPU: its (primary) context, a **compute stream** where kernels run and
/// a **copy stream** where prefetches and evictions run, and what the device
/// can do. Cheap to clone; clones share everything. `Send + Sync`.
///
/// The GPU backend and the kernel launchers reuse this handle: launches go on
/// [`GpuDevice::stream`]`(StreamId::Compute)`, modules load into
/// [`GpuDevice::context`]. Work on the two streams is ordered with
/// [`GpuDevice::record_event`] and [`GpuDevice::wait_event`] (or
/// [`GpuDevice::order`]); the library never synchronises the whole device.
#[derive(Clone)]
pub struct GpuDevice {
    pub(super) inner: Arc<Inner>,
}

impl fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuDevice")
            .field("info", &self.inner.info)
            .finish_non_exhaustive()
    }
}

fn no_gpu(reason: &'static str) -> Error {
    DeviceError::NoGpu { reason }.into()
}

/// Loads the driver and initialises CUDA.
fn init() -> Result<()> {
    if !driver_present() {
        return Err(no_gpu("the CUDA driver library (libcuda) is not installed"));
    }
    match cudarc::driver::result::init() {
        Ok(()) => Ok(()),
        Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => {
            Err(no_gpu("the CUDA driver reports no device"))
        }
        Err(e) => Err(driver("cuInit")(e)),
    }
}

/// The driver's CUDA version.
fn driver_version() -> Result<DriverVersion> {
    let mut version: std::ffi::c_int = 0;
    // SAFETY: cuDriverGetVersion writes one int through the pointer, which
    // points to a live local; the library is loaded (init succeeded).
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(driver("cuDriverGetVersion"))?;
    Ok(DriverVersion(u32::try_from(version).unwrap_or(0)))
}

impl GpuDevice {
    /// Number of CUDA devices.
    ///
    /// # Errors
    /// [`DeviceError::NoGpu`] when the driver library is missing or reports
    /// no device.
    pub fn count() -> Result<usize> {
        init()?;
        let count = CudaContext::device_count().map_err(driver("cuDeviceGetCount"))?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// Opens GPU `ordinal`: retains its primary context, creates the compute
    /// and copy streams and checks that hemem can use it.
    ///
    /// # Errors
    /// [`DeviceError::NoGpu`], [`DeviceError::DeviceOutOfRange`],
    /// [`DeviceError::DriverTooOld`] (the PTX needs CUDA 13.0, driver R580),
    /// [`DeviceError::ComputeCapabilityTooLow`] (below 7.5), driver errors.
    pub fn open(ordinal: usize) -> Result<Self> {
        let count = Self::count()?;
        if count == 0 {
            return Err(no_gpu("the CUDA driver reports no device"));
        }
        if ordinal >= count {
            return Err(DeviceError::DeviceOutOfRange { ordinal, count }.into());
        }
        let driver_version = driver_version()?;
        if driver_version < DriverVersion::CUDA_13_0 {
            return Err(DeviceError::DriverTooOld {
                found: driver_version,
                required: DriverVersion::CUDA_13_0,
            }
            .into());
        }
        let ctx = CudaContext::new(ordinal).map_err(driver("cuDevicePrimaryCtxRetain"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(driver("cuDeviceGetAttribute"))?;
        let compute_capability = ComputeCapability {
            major: u32::try_from(major).unwrap_or(0),
            minor: u32::try_from(minor).unwrap_or(0),
        };
        if compute_capability < ComputeCapability::MIN {
            return Err(DeviceError::ComputeCapabilityTooLow {
                major: compute_capability.major,
                minor: compute_capability.minor,
            }
            .into());
        }
        let attribute = |a: CUdevice_attribute| -> Result<i32> {
            ctx.attribute(a).map_err(driver("cuDeviceGetAttribute"))
        };
        let concurrent_managed_access =
            attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)? != 0;
        let multiprocessors = u32::try_from(attribute(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )?)
        .unwrap_or(1);
        let name = ctx.name().map_err(driver("cuDeviceGetName"))?;
        let (free, total) = ctx.mem_get_info().map_err(driver("cuMemGetInfo"))?;
        let compute = ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        let copy = ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        let info = DeviceInfo {
            ordinal,
            name,
            compute_capability,
            total_bytes: total as u64,
            free_bytes_at_open: free as u64,
            driver_version,
            concurrent_managed_access,
            memory_pools: ctx.has_async_alloc(),
            multiprocessors,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                ctx,
                compute,
                copy,
                info,
                deferred: Mutex::new(None),
                staging: Mutex::new(None),
            }),
        })
    }

    /// What the device is and can do.
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.info.ordinal
    }

    /// Free and total device memory now.
    ///
    /// # Errors
    /// [`DeviceError::Driver`].
    pub fn memory_info(&self) -> Result<MemoryInfo> {
        let (free, total) = self
            .inner
            .ctx
            .mem_get_info()
            .map_err(driver("cuMemGetInfo"))?;
        Ok(MemoryInfo {
            free: free as u64,
            total: total as u64,
        })
    }

    /// The CUDA context (load modules into it; launchers bind it).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }

    /// One of the two streams (launch kernels on [`StreamId::Compute`]).
    pub fn stream(&self, id: StreamId) -> &Arc<CudaStream> {
        match id {
            StreamId::Compute => &self.inner.compute,
            StreamId::Copy => &self.inner.copy,
        }
    }

    /// Makes the context current on the calling thread (every driver call
    /// here does this first; launchers that use cudarc's safe layer get it
    /// from cudarc).
    ///
    /// # Errors
    /// [`DeviceError::Driver`].
    pub fn bind(&self) -> Result<()> {
        self.inner
            .ctx
            .bind_to_thread()
            .map_err(driver("cuCtxSetCurrent"))
    }

    /// Starts (`on`) or stops the capture of profilers started with it off
    /// (`ncu --profile-from-start off`, `nsys --capture-range=cudaProfilerApi`):
    /// [cuProfilerStart](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PROFILER.html).
    /// Without a profiler attached it does nothing.
    ///
    /// # Errors
    /// [`DeviceError::Driver`].
    pub fn set_profiling(&self, on: bool) -> Result<()> {
        self.bind()?;
        let result = if on {
            // SAFETY: no arguments; the context is current on this thread.
            unsafe { cudarc::driver::sys::cuProfilerStart() }
        } else {
            // SAFETY: as above.
            unsafe { cudarc::driver::sys::cuProfilerStop() }
        };
        let op = if on {
            "cuProfilerStart"
        } else {
            "cuProfilerStop"
        };
        result.result().map_err(driver(op))
    }

    /// Records the work queued so far on `stream` (timing disabled: cheap).
    ///
    /// # Errors
    /// [`DeviceError::Driver`].
    pub fn record_event(&self, stream: StreamId) -> Result<Event> {
        self.stream(stream)
            .record_event(None)
            .map(Event)
            .map_err(driver("cuEventRecord"))
    }

    /// Records the work queued so far on `stream` with timing enabled, for
    /// [`Event::elapsed_ms`].
    ///
    /// # Errors
    /// [`DeviceError::Driver`].
    pub fn record_timing_event(&self, stream: StreamId) -> Result<Event> {
        self.stream(stream)
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map(Event)
            .map_err(driver("cuEventRecord"))
    }

    /// Makes `stream` wait (on the device, not the host) for `event`.
    ///
    /// # Errors
    /// [`DeviceError::Driver`].
    pub fn wait_event(&self, stream: StreamId, event: &Event) -> Result<()> {
        self.stream(stream)
            .wait(&event.0)
            .map_err(driver("cuStreamWaitEvent"))
    }

    /// Orders `after` behind the work queued so far on `before` (an event
    /// recorded on `before`, waited for on `after`). A no-op when they are
    /// the same stream.
    ///
    /// # Errors
    /// [`DeviceError::Driver`].
    pub fn order(&self, before: StreamId, after: StreamId) -> Result<()> {
        if before == after {
            return Ok(());
        }
        let event = self.record_event(before)?;
        self.wait_event(after, &event)
    }

    /// Blocks the calling thread until `stream`'s queued work is done (one
    /// stream, never the whole device).
    ///
    /// # Errors
    /// [`DeviceError::Driver`], including errors of earlier asynchronous work.
    pub fn synchronize(&self, stream: StreamId) -> Result<()> {
        self.stream(stream)
            .synchronize()
            .map_err(driver("cuStreamSynchronize"))
    }

    /// The first driver error met where it could not be returned (freeing
    /// memory in a `Drop`), taken out so the next call sees the next one.
    pub fn take_deferred_error(&self) -> Option<Error> {
        self.inner
            .deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Keeps `error` for [`GpuDevice::take_deferred_error`] (the first one wins).
    pub(crate) fn defer_error(&self, error: Error) {
        let mut slot = self
            .inner
            .deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(error);
        }
    }

    /// Keeps the error of `result`, if any.
    pub(crate) fn defer<T>(&self, result: Result<T>) {
        if let Err(e) = result {
            self.defer_error(e);
        }
    }

    /// Whether two handles are the same opened device.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
