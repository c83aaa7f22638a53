//! What the residency manager asks of the device, behind a trait so its
//! decisions run (and are tested) on the CPU with a recording mock.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::timing::{RunClock, RunTimes};
use crate::cuda::{Event, GpuDevice, Location, Pool, PoolAllocError};
use crate::{AllocationId, DeviceMemory, DevicePtr, Result, StreamId};

/// A managed buffer as the residency manager knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManagedRange {
    /// The buffer's allocation id.
    pub id: AllocationId,
    /// Its device address.
    pub ptr: DevicePtr,
    /// Its size in bytes.
    pub bytes: u64,
}

/// The device operations the residency manager issues. Calls come in
/// batches: [`ResidencyDriver::begin`], then advice, prefetches and trims,
/// then [`ResidencyDriver::end`].
pub trait ResidencyDriver: Send + Sync + fmt::Debug {
    /// Orders the batch after the work already queued on the compute stream
    /// (a buffer about to be evicted may still be read there).
    ///
    /// # Errors
    /// Driver errors.
    fn begin(&self) -> Result<()>;

    /// Sets or unsets read-mostly advice.
    ///
    /// # Errors
    /// Driver errors.
    fn set_read_mostly(&self, range: ManagedRange, on: bool) -> Result<()>;

    /// Queues a prefetch to the device (`to_device`) or to the host.
    ///
    /// # Errors
    /// Driver errors.
    fn prefetch(&self, range: ManagedRange, to_device: bool) -> Result<()>;

    /// Trims the device pool to `keep` bytes; returns the bytes it holds after.
    ///
    /// # Errors
    /// Driver errors.
    fn trim_pool(&self, keep: u64) -> Result<u64>;

    /// Orders later compute-stream work after the batch.
    ///
    /// # Errors
    /// Driver errors.
    fn end(&self) -> Result<()>;

    /// A device slot of `bytes` for a streamed object, from the pool,
    /// ordered on the copy stream; `None` when the pool is full.
    ///
    /// # Errors
    /// Driver errors other than out of memory.
    fn allocate_slot(&self, id: AllocationId, bytes: u64) -> Result<Option<DevicePtr>>;

    /// Frees a slot on the copy stream (the caller has ordered the copy
    /// stream after the compute work that read it, with [`Self::begin`]).
    fn free_slot(&self, id: AllocationId, slot: DevicePtr, bytes: u64);

    /// A chunk of `bytes` for the streaming arena, from the pool, ordered
    /// on the copy stream; `None` when the pool is full.
    ///
    /// # Errors
    /// Driver errors other than out of memory.
    fn allocate_chunk(&self, bytes: u64) -> Result<Option<DevicePtr>>;

    /// Frees an arena chunk on the copy stream (ordered as
    /// [`Self::free_slot`]).
    fn free_chunk(&self, chunk: DevicePtr, bytes: u64);

    /// Drops what [`Self::fetch`] recorded for `id` (its object left the
    /// device without a slot of its own to free).
    fn forget_fetch(&self, id: AllocationId);

    /// Marks the compute work queued so far (an operation that read
    /// streamed objects has queued its kernels); returns the mark for
    /// [`Self::wait_for_use`].
    ///
    /// # Errors
    /// Driver errors.
    fn mark_use(&self) -> Result<u64>;

    /// Orders the copy stream after the compute work queued before `mark`
    /// (a device-side wait), so that a range read up to then may be
    /// overwritten or freed by the copy stream. A mark older than those the
    /// driver keeps orders the copy stream after all compute work queued so
    /// far, as [`Self::begin`] does.
    ///
    /// # Errors
    /// Driver errors.
    fn wait_for_use(&self, mark: u64) -> Result<()>;

    /// Queues the copy of a streamed object's master into its slot on the
    /// copy stream and records the event that [`Self::await_fetch`] waits for.
    ///
    /// # Errors
    /// Driver errors.
    fn fetch(&self, id: AllocationId, slot: DevicePtr, master: u64, bytes: u64) -> Result<()>;

    /// The device address at which kernels read the pinned master at
    /// `master` in place (zero-copy), or `None` where the device cannot.
    fn map_master(&self, master: u64) -> Result<Option<DevicePtr>>;

    /// Orders the compute stream after the copy queued by [`Self::fetch`]
    /// for `id` (a device-side wait; the host goes on).
    ///
    /// # Errors
    /// Driver errors.
    fn await_fetch(&self, id: AllocationId) -> Result<()>;

    /// Copies a slot back into its master after the compute work queued so
    /// far, and waits for the copy (objects written on the device before
    /// they were sealed).
    ///
    /// # Errors
    /// Driver errors.
    fn write_back(&self, master: u64, slot: DevicePtr, bytes: u64) -> Result<()>;

    /// Queues a copy of a slot back into its master on the copy stream,
    /// after the compute work queued so far (an object sealed while its
    /// device copy is newer than its master). Later fetches and frees on the
    /// copy stream come after it.
    ///
    /// # Errors
    /// Driver errors.
    fn write_back_async(&self, master: u64, slot: DevicePtr, bytes: u64) -> Result<()>;

    /// Waits for both streams (so that stream-ordered frees have completed
    /// and the pool can hand their memory out again).
    ///
    /// # Errors
    /// Driver errors.
    fn synchronize(&self) -> Result<()>;

    /// Starts timing a run (`on`: the steps marked and the copies queued
    /// from now until [`Self::take_run_times`]), forgetting what an earlier
    /// one left, or stops. The default times nothing.
    fn time_run(&self, _on: bool) {}

    /// Marks the start of a step's compute on the compute stream, after its
    /// waits for its fetches, while a run is timed.
    ///
    /// # Errors
    /// Driver errors.
    fn step_started(&self) -> Result<()> {
        Ok(())
    }

    /// Marks the end of the step started last (before the next step's
    /// waits, or at the run's end), while a run is timed.
    ///
    /// # Errors
    /// Driver errors.
    fn step_ended(&self) -> Result<()> {
        Ok(())
    }

    /// Stops timing and returns what the run measured, waiting for its
    /// work; `None` when nothing was timed (or a step was left unmarked).
    fn take_run_times(&self) -> Option<RunTimes> {
        None
    }
}

/// The real driver: prefetches and evictions on the copy stream, ordered
/// against the compute stream with events.
#[derive(Debug)]
pub(crate) struct GpuResidencyDriver {
    pub(crate) gpu: GpuDevice,
    pub(crate) pool: Option<Arc<Pool>>,
    /// The event behind each streamed object's last fetch.
    pub(crate) fetched: Mutex<HashMap<AllocationId, Event>>,
    /// The latest use marks and their compute-stream events, oldest first.
    marks: Mutex<VecDeque<(u64, Event)>>,
    next_mark: AtomicU64,
    /// The events of a run being timed.
    clock: RunClock,
}

/// Use marks the driver keeps (older ones are waited for as a whole).
const MARKS: usize = 4096;

impl GpuResidencyDriver {
    /// The driver of `gpu` and its pool.
    pub(crate) fn new(gpu: GpuDevice, pool: Option<Arc<Pool>>) -> Self {
        Self {
            gpu,
            pool,
            fetched: Mutex::new(HashMap::new()),
            marks: Mutex::new(VecDeque::new()),
            next_mark: AtomicU64::new(0),
            clock: RunClock::default(),
        }
    }

    fn fetched(&self) -> MutexGuard<'_, HashMap<AllocationId, Event>> {
        self.fetched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `bytes` from the pool, ordered on the copy stream; `None` when the
    /// pool is full.
    fn allocate_on_copy_stream(&self, bytes: u64) -> Result<Option<DevicePtr>> {
        let Some(pool) = &self.pool else {
            return Ok(None);
        };
        match pool.allocate(usize::try_from(bytes).unwrap_or(usize::MAX), StreamId::Copy) {
            Ok(memory) => Ok(Some(memory.ptr())),
            Err(PoolAllocError::OutOfMemory) => Ok(None),
            Err(PoolAllocError::Other(e)) => Err(e),
        }
    }

    fn free_on_copy_stream(&self, ptr: DevicePtr) {
        if let Some(pool) = &self.pool {
            let memory = DeviceMemory {
                ptr,
                stream: StreamId::Copy,
            };
            pool.free(memory);
        }
    }
}

impl ResidencyDriver for GpuResidencyDriver {
    fn begin(&self) -> Result<()> {
        self.gpu.order(StreamId::Compute, StreamId::Copy)
    }

    fn set_read_mostly(&self, range: ManagedRange, on: bool) -> Result<()> {
        self.gpu
            .advise_read_mostly(range.ptr, usize::try_from(range.bytes).unwrap_or(0), on)
    }

    fn prefetch(&self, range: ManagedRange, to_device: bool) -> Result<()> {
        let to = if to_device {
            Location::Device
        } else {
            Location::Host
        };
        self.gpu.prefetch(
            range.ptr,
            usize::try_from(range.bytes).unwrap_or(0),
            to,
            StreamId::Copy,
        )
    }

    fn trim_pool(&self, keep: u64) -> Result<u64> {
        match &self.pool {
            Some(pool) => pool.trim_to(keep),
            None => Ok(0),
        }
    }

    fn end(&self) -> Result<()> {
        self.gpu.order(StreamId::Copy, StreamId::Compute)
    }

    fn allocate_slot(&self, _id: AllocationId, bytes: u64) -> Result<Option<DevicePtr>> {
        self.allocate_on_copy_stream(bytes)
    }

    fn free_slot(&self, id: AllocationId, slot: DevicePtr, _bytes: u64) {
        self.fetched().remove(&id);
        self.free_on_copy_stream(slot);
    }

    fn allocate_chunk(&self, bytes: u64) -> Result<Option<DevicePtr>> {
        self.allocate_on_copy_stream(bytes)
    }

    fn free_chunk(&self, chunk: DevicePtr, _bytes: u64) {
        self.free_on_copy_stream(chunk);
    }

    fn forget_fetch(&self, id: AllocationId) {
        self.fetched().remove(&id);
    }

    fn mark_use(&self) -> Result<u64> {
        let event = self.gpu.record_event(StreamId::Compute)?;
        let mark = self.next_mark.fetch_add(1, Ordering::Relaxed);
        let mut marks = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        marks.push_back((mark, event));
        if marks.len() > MARKS {
            marks.pop_front();
        }
        Ok(mark)
    }

    fn wait_for_use(&self, mark: u64) -> Result<()> {
        let marks = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        let found = marks
            .binary_search_by_key(&mark, |(m, _)| *m)
            .ok()
            .and_then(|i| marks.get(i));
        match found {
            Some((_, event)) => self.gpu.wait_event(StreamId::Copy, event),
            None => self.begin(),
        }
    }

    fn fetch(&self, id: AllocationId, slot: DevicePtr, master: u64, bytes: u64) -> Result<()> {
        let before = self.clock.before_copy(&self.gpu)?;
        self.gpu
            .copy_to_device_async(slot, master, bytes, StreamId::Copy)?;
        if let Some(before) = before {
            self.clock.copied(&self.gpu, bytes, before)?;
        }
        let event = self.gpu.record_event(StreamId::Copy)?;
        self.fetched().insert(id, event);
        Ok(())
    }

    fn map_master(&self, master: u64) -> Result<Option<DevicePtr>> {
        self.gpu.mapped_host(master).map(Some)
    }

    fn await_fetch(&self, id: AllocationId) -> Result<()> {
        match self.fetched().remove(&id) {
            Some(event) => self.gpu.wait_event(StreamId::Compute, &event),
            None => Ok(()),
        }
    }

    fn write_back(&self, master: u64, slot: DevicePtr, bytes: u64) -> Result<()> {
        self.gpu
            .copy_to_host_sync(master, slot, bytes, StreamId::Compute)
    }

    fn write_back_async(&self, master: u64, slot: DevicePtr, bytes: u64) -> Result<()> {
        self.gpu.order(StreamId::Compute, StreamId::Copy)?;
        self.gpu
            .copy_to_host_async(master, slot, bytes, StreamId::Copy)
    }

    fn synchronize(&self) -> Result<()> {
        self.gpu.synchronize(StreamId::Compute)?;
        self.gpu.synchronize(StreamId::Copy)
    }

    fn time_run(&self, on: bool) {
        self.clock.time_run(on);
    }

    fn step_started(&self) -> Result<()> {
        self.clock.step_started(&self.gpu)
    }

    fn step_ended(&self) -> Result<()> {
        self.clock.step_ended(&self.gpu)
    }

    fn take_run_times(&self) -> Option<RunTimes> {
        // A clock that fails leaves the recording untimed (the window
        // split); the error itself comes back from the next operation.
        self.clock.take().ok().flatten()
    }
}

/// A driver that does nothing (tests of the accounting alone).
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct NullDriver;

#[cfg(test)]
impl ResidencyDriver for NullDriver {
    fn begin(&self) -> Result<()> {
        Ok(())
    }

    fn set_read_mostly(&self, _range: ManagedRange, _on: bool) -> Result<()> {
        Ok(())
    }

    fn prefetch(&self, _range: ManagedRange, _to_device: bool) -> Result<()> {
        Ok(())
    }

    fn trim_pool(&self, keep: u64) -> Result<u64> {
        Ok(keep)
    }

    fn end(&self) -> Result<()> {
        Ok(())
    }

    fn allocate_slot(&self, _id: AllocationId, bytes: u64) -> Result<Option<DevicePtr>> {
        Ok(Some(DevicePtr(bytes.max(1) << 8)))
    }

    fn free_slot(&self, _id: AllocationId, _slot: DevicePtr, _bytes: u64) {}

    fn allocate_chunk(&self, bytes: u64) -> Result<Option<DevicePtr>> {
        Ok(Some(DevicePtr(bytes)))
    }

    fn free_chunk(&self, _chunk: DevicePtr, _bytes: u64) {}

    fn forget_fetch(&self, _id: AllocationId) {}

    fn mark_use(&self) -> Result<u64> {
        Ok(0)
    }

    fn wait_for_use(&self, _mark: u64) -> Result<()> {
        Ok(())
    }

    fn map_master(&self, _master: u64) -> Result<Option<DevicePtr>> {
        Ok(None)
    }

    fn fetch(&self, _id: AllocationId, _slot: DevicePtr, _master: u64, _bytes: u64) -> Result<()> {
        Ok(())
    }

    fn await_fetch(&self, _id: AllocationId) -> Result<()> {
        Ok(())
    }

    fn write_back(&self, _master: u64, _slot: DevicePtr, _bytes: u64) -> Result<()> {
        Ok(())
    }

    fn write_back_async(&self, _master: u64, _slot: DevicePtr, _bytes: u64) -> Result<()> {
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod mock {
    //! A driver that records what it is asked, for exact expectations.

    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use super::*;

    /// One recorded call.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Call {
        Begin,
        ReadMostly(u64, bool),
        ToDevice(u64),
        ToHost(u64),
        Trim(u64),
        End,
        Slot(u64),
        FreeSlot(u64),
        /// An arena chunk, by the order it was made in (0, 1, …).
        Chunk(u64),
        FreeChunk(u64),
        /// The copy stream waits for the compute work before a use mark.
        WaitUse(u64),
        Fetch(u64),
        Await(u64),
        WriteBack(u64),
        WriteBackAsync(u64),
        Synchronize,
        /// A master mapped for kernels to read in place, by its address.
        ZeroCopy(u64),
    }

    /// Where the mock maps masters for zero-copy reads (above any chunk).
    pub(crate) const ZERO_COPY_BASE: u64 = 1 << 62;

    /// Records calls; trims report exactly `keep` bytes held afterwards.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct RecordingDriver {
        pub(crate) calls: Arc<Mutex<Vec<Call>>>,
        /// Bytes a trim leaves the pool holding beyond what it was asked to
        /// keep (chunks shared with live allocations, frees not reached yet).
        pub(crate) trim_slack: Arc<AtomicU64>,
        /// Slot allocations refused (as a full pool refuses) before the
        /// next one succeeds.
        pub(crate) refuse_slots: Arc<AtomicU64>,
        /// Chunks made so far; chunk `n` lies at `(n + 1) << 40`.
        pub(crate) chunks: Arc<AtomicU64>,
        /// Chunk allocations refused before the next one succeeds.
        pub(crate) refuse_chunks: Arc<AtomicU64>,
        /// Use marks handed out so far (not recorded as calls).
        pub(crate) marks: Arc<AtomicU64>,
        /// Masters cannot be mapped for zero-copy reads (as on a device
        /// without host mapping).
        pub(crate) no_zero_copy: Arc<std::sync::atomic::AtomicBool>,
        /// The synthetic compute time of each step of a timed run, in
        /// seconds (step `k` takes entry `k` modulo their number); empty:
        /// the mock times nothing, as a driver without a clock.
        pub(crate) step_durations: Arc<Mutex<Vec<f64>>>,
        /// The synthetic wait before each step of a timed run, in seconds
        /// (as `step_durations`; empty: no waits).
        pub(crate) step_waits: Arc<Mutex<Vec<f64>>>,
        /// The copy rate a timed run reports (`None`: not measured).
        pub(crate) copy_rate: Arc<Mutex<Option<f64>>>,
        /// The timed run: whether one is, and whether each step started so
        /// far has ended.
        pub(crate) timed: Arc<Mutex<Option<Vec<bool>>>>,
    }

    impl RecordingDriver {
        /// The calls so far, emptied.
        pub(crate) fn take(&self) -> Vec<Call> {
            std::mem::take(&mut *self.calls.lock().unwrap_or_else(|e| e.into_inner()))
        }

        fn push(&self, call: Call) {
            self.calls
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(call);
        }
    }

    impl ResidencyDriver for RecordingDriver {
        fn begin(&self) -> Result<()> {
            self.push(Call::Begin);
            Ok(())
        }

        fn set_read_mostly(&self, range: ManagedRange, on: bool) -> Result<()> {
            self.push(Call::ReadMostly(range.id.0, on));
            Ok(())
        }

        fn prefetch(&self, range: ManagedRange, to_device: bool) -> Result<()> {
            self.push(if to_device {
                Call::ToDevice(range.id.0)
            } else {
                Call::ToHost(range.id.0)
            });
            Ok(())
        }

        fn trim_pool(&self, keep: u64) -> Result<u64> {
            self.push(Call::Trim(keep));
            Ok(keep + self.trim_slack.load(Ordering::Relaxed))
        }

        fn end(&self) -> Result<()> {
            self.push(Call::End);
            Ok(())
        }

        fn allocate_slot(&self, id: AllocationId, _bytes: u64) -> Result<Option<DevicePtr>> {
            if self
                .refuse_slots
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                return Ok(None);
            }
            self.push(Call::Slot(id.0));
            Ok(Some(DevicePtr((id.0 + 1) << 32)))
        }

        fn free_slot(&self, id: AllocationId, _slot: DevicePtr, _bytes: u64) {
            self.push(Call::FreeSlot(id.0));
        }

        fn allocate_chunk(&self, _bytes: u64) -> Result<Option<DevicePtr>> {
            if self
                .refuse_chunks
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                return Ok(None);
            }
            let n = self.chunks.fetch_add(1, Ordering::Relaxed);
            self.push(Call::Chunk(n));
            Ok(Some(DevicePtr((n + 1) << 40)))
        }

        fn free_chunk(&self, chunk: DevicePtr, _bytes: u64) {
            self.push(Call::FreeChunk((chunk.0 >> 40) - 1));
        }

        fn forget_fetch(&self, _id: AllocationId) {}

        fn mark_use(&self) -> Result<u64> {
            Ok(self.marks.fetch_add(1, Ordering::Relaxed))
        }

        fn wait_for_use(&self, mark: u64) -> Result<()> {
            self.push(Call::WaitUse(mark));
            Ok(())
        }

        fn fetch(
            &self,
            id: AllocationId,
            _slot: DevicePtr,
            _master: u64,
            _bytes: u64,
        ) -> Result<()> {
            self.push(Call::Fetch(id.0));
            Ok(())
        }

        fn map_master(&self, master: u64) -> Result<Option<DevicePtr>> {
            if self.no_zero_copy.load(Ordering::Relaxed) {
                return Ok(None);
            }
            self.push(Call::ZeroCopy(master));
            Ok(Some(DevicePtr(ZERO_COPY_BASE | master)))
        }

        fn await_fetch(&self, id: AllocationId) -> Result<()> {
            self.push(Call::Await(id.0));
            Ok(())
        }

        fn write_back(&self, master: u64, _slot: DevicePtr, _bytes: u64) -> Result<()> {
            self.push(Call::WriteBack(master));
            Ok(())
        }

        fn write_back_async(&self, master: u64, _slot: DevicePtr, _bytes: u64) -> Result<()> {
            self.push(Call::WriteBackAsync(master));
            Ok(())
        }

        fn synchronize(&self) -> Result<()> {
            self.push(Call::Synchronize);
            Ok(())
        }

        fn time_run(&self, on: bool) {
            *lock(&self.timed) = on.then(Vec::new);
        }

        fn step_started(&self) -> Result<()> {
            if let Some(steps) = lock(&self.timed).as_mut() {
                steps.push(false);
            }
            Ok(())
        }

        fn step_ended(&self) -> Result<()> {
            if let Some(last) = lock(&self.timed).as_mut().and_then(|s| s.last_mut()) {
                *last = true;
            }
            Ok(())
        }

        fn take_run_times(&self) -> Option<RunTimes> {
            let steps = lock(&self.timed).take()?;
            let durations = lock(&self.step_durations).clone();
            if durations.is_empty() || steps.is_empty() || !steps.iter().all(|&e| e) {
                return None;
            }
            Some(RunTimes {
                steps: (0..steps.len())
                    .map(|k| durations[k % durations.len()])
                    .collect(),
                waits: {
                    let waits = lock(&self.step_waits).clone();
                    (0..steps.len())
                        .map(|k| match waits.len() {
                            0 => 0.0,
                            n => waits[k % n],
                        })
                        .collect()
                },
                copy_rate: *lock(&self.copy_rate),
            })
        }
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }
}
