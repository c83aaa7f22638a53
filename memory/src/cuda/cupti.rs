//! CUPTI's unified-memory counters and copy records: independent
//! measurements of managed-memory traffic and of explicit copies, used to
//! check the residency manager's own counts (`cuMemGetInfo` cannot: the
//! driver keeps evicted managed pages' device memory cached). The copy
//! records ([`MemcpyCounters`]) count what the `planned` policy moves.
//!
//! Set up as checked on the H200 (DESIGN.md, "Facts measured on the GPU
//! machines"): before any CUDA context exists, register the activity buffer
//! callbacks, configure the unified-memory counters (scope process / single
//! device; kinds bytes host→device, bytes device→host, GPU page faults) and
//! enable `CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER`. After each phase,
//! synchronise and call [`UnifiedMemoryCounters::collect`], which flushes the
//! buffers (`cuptiActivityFlushAll(1)`) and sums the
//! `CUpti_ActivityUnifiedMemoryCounter3` records.
//!
//! A record's `flags` is the migration cause: 1 user prefetch, 2 coherence
//! (a page fault), 3 speculative prefetch, 4 eviction. Prefetch traffic is
//! counted exactly; fault-driven traffic only as a lower bound (records past
//! about 8191 per burst are lost without a dropped count), so "no faults" is
//! checked as "no fault record at all".
//!
//! CUPTI delivers records through C callbacks without a user pointer, so the
//! sums live in one process-wide mutex: this is test instrumentation, enabled
//! once per process.

use std::alloc::{Layout, alloc, dealloc};
use std::sync::{Mutex, PoisonError};

use cudarc::cupti::result::{CuptiError, activity};
use cudarc::cupti::sys::{
    CUpti_Activity, CUpti_ActivityAPI, CUpti_ActivityKernel4, CUpti_ActivityKind,
    CUpti_ActivityMemcpy, CUpti_ActivityMemset, CUpti_ActivityUnifiedMemoryCounter3,
    CUpti_ActivityUnifiedMemoryCounterConfig, CUpti_ActivityUnifiedMemoryCounterKind,
    CUpti_ActivityUnifiedMemoryCounterScope,
};
use cudarc::driver::sys::CUcontext;

use super::probe::{cupti_present, driver_present};
use super::timeline::Timeline;
use crate::{DeviceError, Error, Result};

const BUFFER_BYTES: usize = 8 << 20;
const BUFFER_ALIGN: usize = 8;

/// Migration causes in a record's `flags`.
const CAUSE_USER: u32 = 1;
const CAUSE_COHERENCE: u32 = 2;

/// Managed-memory traffic seen by CUPTI since the previous collection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnifiedMemoryTraffic {
    /// Host→device bytes moved by user prefetches (`cuMemPrefetchAsync`).
    pub htod_prefetch_bytes: u64,
    /// Host→device bytes moved because the GPU faulted (a lower bound).
    pub htod_fault_bytes: u64,
    /// Host→device bytes moved for any other cause (speculative prefetch…).
    pub htod_other_bytes: u64,
    /// Device→host bytes moved by user prefetches (evictions).
    pub dtoh_prefetch_bytes: u64,
    /// Device→host bytes moved for any other cause.
    pub dtoh_other_bytes: u64,
    /// GPU page-fault records.
    pub gpu_fault_records: u64,
    /// GPU page faults (sum of the fault records' values).
    pub gpu_faults: u64,
    /// Unified-memory records read.
    pub records: u64,
    /// Records CUPTI reported as dropped.
    pub dropped: u64,
}

impl UnifiedMemoryTraffic {
    /// All host→device bytes.
    pub fn htod_bytes(&self) -> u64 {
        self.htod_prefetch_bytes + self.htod_fault_bytes + self.htod_other_bytes
    }

    /// All device→host bytes.
    pub fn dtoh_bytes(&self) -> u64 {
        self.dtoh_prefetch_bytes + self.dtoh_other_bytes
    }

    /// Whether any record says the GPU faulted on managed memory.
    pub fn any_gpu_fault(&self) -> bool {
        self.gpu_fault_records > 0 || self.htod_fault_bytes > 0
    }
}

/// Explicit copies (`cuMemcpy*`) seen by CUPTI since the previous
/// collection: what the `planned` policy's fetches and write-backs move
/// across PCIe, counted by the driver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemcpyTraffic {
    /// Host→device bytes.
    pub htod_bytes: u64,
    /// Device→host bytes.
    pub dtoh_bytes: u64,
    /// Copy records read.
    pub records: u64,
}

/// `CUpti_ActivityMemcpyKind`: host to device, device to host.
const MEMCPY_HTOD: u8 = 1;
const MEMCPY_DTOH: u8 = 2;

/// The process-wide sums of copy records.
static MEMCPY: Mutex<MemcpyTraffic> = Mutex::new(MemcpyTraffic {
    htod_bytes: 0,
    dtoh_bytes: 0,
    records: 0,
});

/// The intervals of kernel and host→device copy records, while a
/// [`KernelTimeline`] is enabled.
static TIMELINE: Mutex<Option<Timeline>> = Mutex::new(None);

/// Adds to the timeline, while a [`KernelTimeline`] is enabled.
fn on_timeline(add: impl FnOnce(&mut Timeline)) {
    if let Some(t) = TIMELINE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_mut()
    {
        add(t);
    }
}

/// The process-wide sums the completion callback adds to.
static SUMS: Mutex<UnifiedMemoryTraffic> = Mutex::new(UnifiedMemoryTraffic {
    htod_prefetch_bytes: 0,
    htod_fault_bytes: 0,
    htod_other_bytes: 0,
    dtoh_prefetch_bytes: 0,
    dtoh_other_bytes: 0,
    gpu_fault_records: 0,
    gpu_faults: 0,
    records: 0,
    dropped: 0,
});

fn cupti(op: &'static str) -> impl FnOnce(CuptiError) -> Error {
    move |e| {
        DeviceError::Cupti {
            op,
            code: e.0 as u32,
        }
        .into()
    }
}

fn buffer_layout() -> Option<Layout> {
    Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN).ok()
}

/// CUPTI asks for a buffer to fill with activity records.
unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    let ptr = buffer_layout().map_or(std::ptr::null_mut(), |layout| {
        // SAFETY: the layout has a non-zero size.
        unsafe { alloc(layout) }
    });
    // SAFETY: CUPTI passes valid out-pointers; a null buffer tells it that
    // none could be provided (records are then dropped and counted).
    unsafe {
        *buffer = ptr;
        *size = if ptr.is_null() { 0 } else { BUFFER_BYTES };
        *max_records = 0;
    }
}

/// CUPTI hands back a filled buffer: add its unified-memory records to
/// [`SUMS`] and free it.
unsafe extern "C" fn buffer_completed(
    _context: CUcontext,
    _stream_id: u32,
    buffer: *mut u8,
    _size: usize,
    valid_size: usize,
) {
    if buffer.is_null() {
        return;
    }
    let mut sums = SUMS.lock().unwrap_or_else(PoisonError::into_inner);
    let mut record: *mut CUpti_Activity = std::ptr::null_mut();
    loop {
        // SAFETY: buffer/valid_size are what CUPTI filled; record is an
        // out-pointer to a live local.
        let next = unsafe { activity::get_next_record(buffer, valid_size, &mut record) };
        if next.is_err() || record.is_null() {
            break;
        }
        // SAFETY: CUPTI returned a pointer to a record inside the buffer;
        // every record starts with its kind.
        let kind = unsafe { (*record).kind };
        if kind == CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
            || kind == CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL
        {
            // SAFETY: the kernel records CUPTI 13 delivers (version 10 and
            // on) have CUpti_ActivityKernel4's fields up to its timestamps,
            // at the same offsets (`kernel_records_keep_their_timestamps`),
            // and are longer; read_unaligned copes with the packing.
            let k = unsafe { std::ptr::read_unaligned(record.cast::<CUpti_ActivityKernel4>()) };
            let name = if k.name.is_null() {
                String::new()
            } else {
                // SAFETY: a non-null name is a NUL-terminated string CUPTI
                // keeps alive while the kernel's module is loaded.
                unsafe { std::ffi::CStr::from_ptr(k.name) }
                    .to_string_lossy()
                    .into_owned()
            };
            on_timeline(|t| {
                t.kernels.push((k.start, k.end));
                t.names.push(name);
            });
            continue;
        }
        if kind == CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET {
            // SAFETY: every version of the memset record starts with
            // CUpti_ActivityMemset's fields up to its timestamps and is at
            // least as long; read_unaligned copes with the packing.
            let m = unsafe { std::ptr::read_unaligned(record.cast::<CUpti_ActivityMemset>()) };
            on_timeline(|t| {
                t.kernels.push((m.start, m.end));
                t.names.push("memset".to_owned());
            });
            continue;
        }
        if kind == CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER {
            // SAFETY: driver API records have the CUpti_ActivityAPI layout;
            // read_unaligned copes with the packing.
            let c = unsafe { std::ptr::read_unaligned(record.cast::<CUpti_ActivityAPI>()) };
            on_timeline(|t| t.calls.push((c.start, c.end, c.cbid)));
            continue;
        }
        if kind == CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY {
            // SAFETY: every version of the copy record starts with the
            // fields of CUpti_ActivityMemcpy (kind, copy kind, …, bytes) and
            // is at least as long; read_unaligned copes with the packing.
            let copy = unsafe { std::ptr::read_unaligned(record.cast::<CUpti_ActivityMemcpy>()) };
            if copy.copyKind == MEMCPY_HTOD {
                on_timeline(|t| t.copies.push((copy.start, copy.end)));
            }
            let mut m = MEMCPY.lock().unwrap_or_else(PoisonError::into_inner);
            m.records += 1;
            match copy.copyKind {
                MEMCPY_HTOD => m.htod_bytes += copy.bytes,
                MEMCPY_DTOH => m.dtoh_bytes += copy.bytes,
                _ => {}
            }
            continue;
        }
        if kind != CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER {
            continue;
        }
        // SAFETY: unified-memory-counter records of this CUPTI (CUDA 12.8+)
        // have the CUpti_ActivityUnifiedMemoryCounter3 layout; the record
        // lies inside the buffer; read_unaligned copes with the packed layout.
        let um = unsafe {
            std::ptr::read_unaligned(record.cast::<CUpti_ActivityUnifiedMemoryCounter3>())
        };
        let value = um.value;
        let cause = um.flags;
        sums.records += 1;
        match um.counterKind {
            CUpti_ActivityUnifiedMemoryCounterKind::CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD => {
                match cause {
                    CAUSE_USER => sums.htod_prefetch_bytes += value,
                    CAUSE_COHERENCE => sums.htod_fault_bytes += value,
                    _ => sums.htod_other_bytes += value,
                }
            }
            CUpti_ActivityUnifiedMemoryCounterKind::CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH => {
                match cause {
                    CAUSE_USER => sums.dtoh_prefetch_bytes += value,
                    _ => sums.dtoh_other_bytes += value,
                }
            }
            CUpti_ActivityUnifiedMemoryCounterKind::CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT => {
                sums.gpu_fault_records += 1;
                sums.gpu_faults += value;
            }
            _ => {}
        }
    }
    let mut dropped: usize = 0;
    // SAFETY: a null context asks for the global count; dropped is a live
    // out-pointer.
    if unsafe { activity::get_num_dropped_records(std::ptr::null_mut(), 0, &mut dropped) }.is_ok() {
        sums.dropped += dropped as u64;
    }
    drop(sums);
    if let Some(layout) = buffer_layout() {
        // SAFETY: buffer came from buffer_requested with this layout.
        unsafe { dealloc(buffer, layout) };
    }
}

/// CUPTI's unified-memory counters, enabled for one device of this process.
#[derive(Debug)]
pub struct UnifiedMemoryCounters {
    _private: (),
}

impl UnifiedMemoryCounters {
    /// Enables the counters for device `ordinal`. Call it before the process
    /// creates any CUDA context (before `GpuDevice::open`).
    ///
    /// # Errors
    /// [`DeviceError::NoGpu`] without libcuda or libcupti;
    /// [`DeviceError::Cupti`] when CUPTI refuses (a context created before
    /// this call is one cause).
    pub fn enable(ordinal: u32) -> Result<Self> {
        if !driver_present() {
            return Err(DeviceError::NoGpu {
                reason: "the CUDA driver library (libcuda) is not installed",
            }
            .into());
        }
        if !cupti_present() {
            return Err(DeviceError::NoGpu {
                reason: "libcupti is not on the library path",
            }
            .into());
        }
        activity::register_callbacks(Some(buffer_requested), Some(buffer_completed))
            .map_err(cupti("cuptiActivityRegisterCallbacks"))?;
        let kinds = [
            CUpti_ActivityUnifiedMemoryCounterKind::CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
            CUpti_ActivityUnifiedMemoryCounterKind::CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
            CUpti_ActivityUnifiedMemoryCounterKind::CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
        ];
        let mut config: Vec<CUpti_ActivityUnifiedMemoryCounterConfig> = kinds
            .into_iter()
            .map(|kind| CUpti_ActivityUnifiedMemoryCounterConfig {
                scope: CUpti_ActivityUnifiedMemoryCounterScope::CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
                kind,
                deviceId: ordinal,
                enable: 1,
            })
            .collect();
        let configure_and_enable = |config: &mut Vec<CUpti_ActivityUnifiedMemoryCounterConfig>| {
            // SAFETY: config points to `len` initialised configs that live for
            // the call.
            unsafe {
                activity::configure_unified_memory_counter(config.as_mut_ptr(), config.len() as u32)
            }
            .map_err(cupti("cuptiActivityConfigureUnifiedMemoryCounter"))?;
            activity::enable(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
                .map_err(cupti("cuptiActivityEnable"))
        };
        if configure_and_enable(&mut config).is_err() {
            // CUPTI answers NOT_READY on some drivers until the driver API is
            // initialised; cuInit creates no context, so the counters still
            // see every context this process makes.
            cudarc::driver::result::init().map_err(|error| DeviceError::Driver {
                op: "cuInit",
                error,
            })?;
            configure_and_enable(&mut config)?;
        }
        *SUMS.lock().unwrap_or_else(PoisonError::into_inner) = UnifiedMemoryTraffic::default();
        Ok(Self { _private: () })
    }

    /// Flushes CUPTI's buffers and returns the traffic since the previous
    /// collection. Synchronise the streams whose traffic should count first.
    ///
    /// # Errors
    /// [`DeviceError::Cupti`].
    pub fn collect(&self) -> Result<UnifiedMemoryTraffic> {
        // 1 = CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: flush incomplete buffers too.
        activity::flush_all(1).map_err(cupti("cuptiActivityFlushAll"))?;
        let mut sums = SUMS.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(std::mem::take(&mut *sums))
    }
}

impl Drop for UnifiedMemoryCounters {
    fn drop(&mut self) {
        let _ = activity::disable(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
        let _ = activity::flush_all(1);
    }
}

/// Registers the buffer callbacks and enables the activity records of
/// `kinds` (registering again is harmless: the callbacks are the same).
fn enable_records(kinds: &[CUpti_ActivityKind]) -> Result<()> {
    if !driver_present() || !cupti_present() {
        return Err(DeviceError::NoGpu {
            reason: "the CUDA driver library or libcupti is not available",
        }
        .into());
    }
    activity::register_callbacks(Some(buffer_requested), Some(buffer_completed))
        .map_err(cupti("cuptiActivityRegisterCallbacks"))?;
    for &kind in kinds {
        activity::enable(kind).map_err(cupti("cuptiActivityEnable"))?;
    }
    Ok(())
}

/// CUPTI's copy records (`CUPTI_ACTIVITY_KIND_MEMCPY`), enabled for this
/// process: the bytes explicit copies move, independent of hemem's counts.
#[derive(Debug)]
pub struct MemcpyCounters {
    _private: (),
}

impl MemcpyCounters {
    /// Enables the copy records. Call it before the process creates any CUDA
    /// context.
    ///
    /// # Errors
    /// [`DeviceError::NoGpu`] without libcuda or libcupti;
    /// [`DeviceError::Cupti`] when CUPTI refuses.
    pub fn enable() -> Result<Self> {
        enable_records(&[CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY])?;
        *MEMCPY.lock().unwrap_or_else(PoisonError::into_inner) = MemcpyTraffic::default();
        Ok(Self { _private: () })
    }

    /// Flushes CUPTI's buffers and returns the copies since the previous
    /// collection. Synchronise the streams whose copies should count first.
    ///
    /// # Errors
    /// [`DeviceError::Cupti`].
    pub fn collect(&self) -> Result<MemcpyTraffic> {
        activity::flush_all(1).map_err(cupti("cuptiActivityFlushAll"))?;
        let mut sums = MEMCPY.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(std::mem::take(&mut *sums))
    }
}

impl Drop for MemcpyCounters {
    fn drop(&mut self) {
        let _ = activity::disable(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY);
        let _ = activity::flush_all(1);
    }
}

/// The activity kinds a [`KernelTimeline`] enables.
const TIMELINE_KINDS: [CUpti_ActivityKind; 3] = [
    CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET,
    CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER,
];

/// The name of the driver call a [`Timeline`]'s callback id stands for
/// (`cuLaunchKernel`, …); `None` where CUPTI cannot name it.
pub fn driver_call_name(cbid: u32) -> Option<String> {
    let mut name: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: name is a live out-pointer; CUPTI sets it to a static,
    // NUL-terminated string on success.
    let named = unsafe {
        cudarc::cupti::result::get_callback_name(
            cudarc::cupti::sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
            cbid,
            &mut name,
        )
    };
    if named.is_err() || name.is_null() {
        return None;
    }
    // SAFETY: checked non-null above; CUPTI's names are static strings.
    Some(
        unsafe { std::ffi::CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// CUPTI's kernel, memset and driver-call records
/// (`CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`, `MEMSET`, `DRIVER`), enabled
/// for this process, with the host→device copy records when
/// [`MemcpyCounters`] is enabled too: the intervals a [`Timeline`] sums into
/// a run's busy and idle device time. Each kernel then costs a record
/// (about a microsecond of the driver's time, more with thousands of short
/// kernels): a diagnostic, not for the figures a run reports as its speed.
#[derive(Debug)]
pub struct KernelTimeline {
    _private: (),
}

impl KernelTimeline {
    /// Enables the kernel records. Call it before the process creates any
    /// CUDA context (and after [`MemcpyCounters::enable`], for the copies).
    ///
    /// # Errors
    /// [`DeviceError::NoGpu`] without libcuda or libcupti;
    /// [`DeviceError::Cupti`] when CUPTI refuses.
    pub fn enable() -> Result<Self> {
        enable_records(&TIMELINE_KINDS)?;
        *TIMELINE.lock().unwrap_or_else(PoisonError::into_inner) = Some(Timeline::default());
        Ok(Self { _private: () })
    }

    /// Flushes CUPTI's buffers and returns the intervals recorded since the
    /// previous collection. Synchronise the device first.
    ///
    /// # Errors
    /// [`DeviceError::Cupti`].
    pub fn collect(&self) -> Result<Timeline> {
        activity::flush_all(1).map_err(cupti("cuptiActivityFlushAll"))?;
        let mut timeline = TIMELINE.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(timeline.replace(Timeline::default()).unwrap_or_default())
    }
}

impl Drop for KernelTimeline {
    fn drop(&mut self) {
        for kind in TIMELINE_KINDS {
            let _ = activity::disable(kind);
        }
        let _ = activity::flush_all(1);
        *TIMELINE.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use cudarc::cupti::sys::{CUpti_ActivityKernel4, CUpti_ActivityKernel10};

    #[test]
    fn kernel_records_keep_their_timestamps() {
        // The callback reads every kernel record as version 4.
        assert_eq!(
            (
                offset_of!(CUpti_ActivityKernel4, kind),
                offset_of!(CUpti_ActivityKernel4, start),
                offset_of!(CUpti_ActivityKernel4, end)
            ),
            (
                offset_of!(CUpti_ActivityKernel10, kind),
                offset_of!(CUpti_ActivityKernel10, start),
                offset_of!(CUpti_ActivityKernel10, end)
            )
        );
        assert_eq!(
            offset_of!(CUpti_ActivityKernel4, name),
            offset_of!(CUpti_ActivityKernel10, name)
        );
        assert!(
            std::mem::size_of::<CUpti_ActivityKernel4>()
                <= std::mem::size_of::<CUpti_ActivityKernel10>()
        );
    }
}
