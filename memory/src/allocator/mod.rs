//! [`Allocator`], the handle the rest of hemem allocates through.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use zeroize::Zeroize;

use crate::adaptors::{BudgetAdaptor, TraceAdaptor, TraceHandle};
use crate::cuda::{GpuDevice, Pool};
use crate::policy::PlacementPolicy;
use crate::residency::{GpuResidencyDriver, Residency, ResidencyGuard, ResidencyUsage};
use crate::resource::ZeroingFailures;
use crate::resources::{
    DevicePoolResource, ManagedResource, PinnedHostResource, Router, StreamedResource,
};
use crate::statistics::{StatisticsHandle, StatisticsScope};
use crate::trace::Trace;
use crate::{
    AllocRequest, AllocationId, Buffer, CachingAdaptor, DeviceError, Error, HostResource,
    MemoryClass, MemoryConfig, MemoryResource, Oversubscription, Placement, PolicyKind,
    ReplayCheckAdaptor, Result, Statistics, StatisticsAdaptor, StreamId,
};

/// The parts a configured allocator keeps beside its chain.
#[derive(Clone, Default)]
struct Parts {
    device: Option<GpuDevice>,
    pool: Option<Arc<Pool>>,
    residency: Option<Arc<Residency>>,
    policy: Option<Arc<dyn PlacementPolicy>>,
    trace: Option<TraceHandle>,
    trace_path: Option<PathBuf>,
    zeroing: ZeroingFailures,
}

/// A composed resource chain plus its statistics. Cheap to clone; clones share
/// the chain, the counters and the residency manager.
///
/// On the GPU ([`Allocator::gpu`]) the chain is, outside-in,
/// `TraceAdaptor<StatisticsAdaptor<BudgetAdaptor<Router>>>` with the pool,
/// managed, pinned-host and host resources behind the router. Besides
/// allocation it moves data ([`Allocator::upload`], [`Allocator::download`],
/// [`Allocator::copy`], [`Allocator::zero`]) and takes operations'
/// declarations of the buffers they touch ([`Allocator::prepare`]). The same
/// calls work for host buffers, so backends use one API.
///
/// # Sensitive memory
///
/// Buffers of secret-key material are allocated sensitive
/// ([`Allocator::allocate_sensitive`]): every resource zeroes them before
/// their memory is reused or released (host and pinned memory at once,
/// device memory by a memset queued before the free on the buffer's
/// stream), the caching adaptor never keeps them, the streamed placement
/// refuses them, and an upload into one zeroes the pinned staging it went
/// through. [`Allocator::release`] zeroes a buffer and returns a failure
/// itself; a buffer dropped instead cannot return one, so a zeroing that
/// fails there keeps the block out of reuse and the failure is returned,
/// once, by the allocator's next fallible call ([`Allocator::check`] asks
/// explicitly) as [`Error::ZeroingFailed`].
#[derive(Clone)]
pub struct Allocator {
    top: Arc<dyn MemoryResource>,
    statistics: StatisticsHandle,
    next_id: Arc<AtomicU64>,
    parts: Parts,
}

impl Allocator {
    /// Host memory with statistics: the CPU backend's allocator. Freed
    /// blocks are cached for reuse up to an eighth of physical memory.
    pub fn host() -> Self {
        let host = HostResource::new();
        let limit = host.limit() / 8;
        let counted = StatisticsAdaptor::new(CachingAdaptor::new(host, limit));
        let statistics = counted.handle();
        Self::from_parts(Arc::new(counted), statistics)
    }

    /// An allocator over an already composed chain whose statistics are read
    /// through `statistics`.
    pub fn from_parts(top: Arc<dyn MemoryResource>, statistics: StatisticsHandle) -> Self {
        Self {
            top,
            statistics,
            next_id: Arc::new(AtomicU64::new(1)),
            parts: Parts::default(),
        }
    }

    /// A host allocator for `config`: statistics, and the allocation trace
    /// when `config.record_trace` is set. The policy is built (so a bad
    /// profiled trace is reported) but has nothing to place on the host: a
    /// CPU run records host allocations, and under `profiled` each request
    /// is checked against the recording ([`ReplayCheckAdaptor`]).
    ///
    /// # Errors
    /// The policy's errors (a malformed or missing trace for `profiled`).
    pub fn host_with(config: &MemoryConfig) -> Result<Self> {
        let policy = config.policy.build(u64::MAX)?;
        let statistics = StatisticsHandle::default();
        let host = HostResource::new();
        let limit = host.limit() / 8;
        let counted =
            StatisticsAdaptor::with_handle(CachingAdaptor::new(host, limit), statistics.clone());
        let traced = TraceAdaptor::new(counted, config.record_trace.is_some());
        let trace = config.record_trace.as_ref().map(|_| traced.handle());
        let top: Arc<dyn MemoryResource> = match config.policy.kind() {
            PolicyKind::Profiled => Arc::new(ReplayCheckAdaptor::new(traced, Arc::clone(&policy))),
            _ => Arc::new(traced),
        };
        let mut allocator = Self::from_parts(top, statistics);
        allocator.parts.policy = Some(policy);
        allocator.parts.trace = trace;
        allocator.parts.trace_path.clone_from(&config.record_trace);
        Ok(allocator)
    }

    /// The GPU allocator for `device` and `config`: resolves the budget
    /// against the device's free memory, builds the policy, creates the pool,
    /// the managed resource (when the device has concurrent managed access),
    /// the pinned arena and the residency manager, and composes the chain.
    ///
    /// # Errors
    /// [`crate::ConfigError::BudgetTooLarge`]; [`DeviceError::ManagedUnsupported`]
    /// for a policy that places managed memory on a device without concurrent
    /// managed access; [`DeviceError::PoolsUnsupported`]; policy and driver
    /// errors.
    pub fn gpu(device: &GpuDevice, config: &MemoryConfig) -> Result<Self> {
        config.check_streaming_numbers()?;
        let free = device.memory_info()?.free;
        // The budget the pool can really be held to (whole 32 MiB chunks):
        // what the accounting and every report use.
        let budget = Pool::cap(config.resolve_budget(free)?, config.device_pool);
        let policy = config.policy.build(budget)?;
        let statistics = StatisticsHandle::default();
        // The pool can never hold more than the budget: under the `planned`
        // policy everything on the device comes from it, so the driver itself
        // enforces the cap.
        let pool = Arc::new(Pool::create(device, budget, config.device_pool)?);
        let pool_handle = Arc::clone(&pool);
        let zeroing = ZeroingFailures::default();
        let residency = Arc::new(Residency::new(
            budget,
            policy.prefetches_on_use(),
            config.eviction.unwrap_or_else(|| policy.eviction()),
            Box::new(GpuResidencyDriver::new(
                device.clone(),
                Some(Arc::clone(&pool)),
            )),
            statistics.clone(),
        ));
        residency.set_streaming_reserve(config.streaming_reserve);
        residency.set_streaming_arena(config.streaming_arena);
        residency.set_streaming_margin(config.streaming_margin);
        residency.set_zero_copy(config.zero_copy);
        residency.set_streaming_plan(config.streaming_plan);
        residency.set_streaming_slack(config.streaming_slack);
        residency.set_time_every_run(config.time_runs);
        residency.set_pool_granule(pool.granule());
        let mut router = Router::new(Arc::clone(&policy))
            .with(
                Placement::DevicePool,
                DevicePoolResource::new(device, pool, zeroing.clone()),
            )
            .with(
                Placement::Streamed,
                StreamedResource::new(device, Arc::clone(&residency)),
            )
            .with(Placement::Host, HostResource::new());
        if device.info().concurrent_managed_access {
            let cap = match config.oversubscription {
                Oversubscription::Refuse => Some(free),
                Oversubscription::AllowDriverManaged => None,
            };
            let managed = Arc::new(ManagedResource::new(
                device,
                Arc::clone(&residency),
                Arc::clone(&policy),
                cap,
                budget / 16,
                zeroing.clone(),
            )?);
            // The residency manager gives the kept blocks back before it
            // evicts a live buffer (a weak link: the resource holds it).
            let kept = Arc::downgrade(&managed);
            residency.set_kept_release(Box::new(move || {
                kept.upgrade().map_or(0, |m| m.release_kept())
            }));
            router = router.with(Placement::Managed, managed);
        } else if policy.name() != "device" {
            return Err(DeviceError::ManagedUnsupported {
                ordinal: device.ordinal(),
            }
            .into());
        }
        if config.pinned_bytes > 0 {
            router = router.with(
                Placement::PinnedHost,
                PinnedHostResource::new(device, config.pinned_bytes)?,
            );
        }
        let budgeted = BudgetAdaptor::new(router, Arc::clone(&residency));
        let counted = StatisticsAdaptor::with_handle(budgeted, statistics.clone());
        let traced = TraceAdaptor::new(counted, config.record_trace.is_some());
        let trace = config.record_trace.as_ref().map(|_| traced.handle());
        let mut allocator = Self::from_parts(Arc::new(traced), statistics);
        allocator.parts = Parts {
            device: Some(device.clone()),
            pool: Some(pool_handle),
            residency: Some(residency),
            policy: Some(policy),
            trace,
            trace_path: config.record_trace.clone(),
            zeroing,
        };
        Ok(allocator)
    }

    /// Allocates `bytes` for data of `class`, ordered on the compute stream.
    ///
    /// # Errors
    /// Whatever the chain refuses: zero or oversized requests, exhausted
    /// memory, an exceeded budget; [`Error::ZeroingFailed`] for an earlier
    /// zeroing that failed in a drop (see [`Allocator::check`]).
    pub fn allocate(&self, class: MemoryClass, bytes: usize) -> Result<Buffer> {
        self.allocate_with(class, bytes, false, StreamId::Compute)
    }

    /// Allocates memory for secret-key material: it is zeroed before its
    /// memory is reused or released, in every placement, and counted in
    /// [`ClassStatistics::sensitive_allocations`](crate::ClassStatistics).
    ///
    /// # Errors
    /// As [`Allocator::allocate`].
    pub fn allocate_sensitive(&self, class: MemoryClass, bytes: usize) -> Result<Buffer> {
        self.allocate_with(class, bytes, true, StreamId::Compute)
    }

    /// Allocates memory ordered on `stream` (pooled memory is allocated and
    /// freed in that stream's order).
    ///
    /// # Errors
    /// As [`Allocator::allocate`].
    pub fn allocate_on(
        &self,
        class: MemoryClass,
        bytes: usize,
        sensitive: bool,
        stream: StreamId,
    ) -> Result<Buffer> {
        self.allocate_with(class, bytes, sensitive, stream)
    }

    fn allocate_with(
        &self,
        class: MemoryClass,
        bytes: usize,
        sensitive: bool,
        stream: StreamId,
    ) -> Result<Buffer> {
        self.check()?;
        if bytes == 0 {
            return Err(Error::ZeroSize { class });
        }
        let request = AllocRequest {
            id: AllocationId(self.next_id.fetch_add(1, Ordering::Relaxed)),
            bytes,
            class,
            sensitive,
            stream,
        };
        let allocation = self.top.allocate(&request)?;
        Ok(Buffer::new(allocation, Arc::clone(&self.top)))
    }

    /// Returns, once, a zeroing failure met where it could not be returned:
    /// sensitive memory released by a buffer's `Drop` that the driver would
    /// not zero (the block is kept out of reuse). Every fallible call of the
    /// allocator starts with this check, so the failure reaches the caller
    /// at the latest with its next allocation or transfer.
    ///
    /// # Errors
    /// [`Error::ZeroingFailed`].
    pub fn check(&self) -> Result<()> {
        match self.parts.zeroing.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Releases `buffer`: zeroes it first when it is sensitive, and returns
    /// what the zeroing met, which a drop cannot. Use it for secret material
    /// whose release should fail loudly (key generation's and decryption's
    /// temporaries). Device memory is zeroed by a memset queued on its
    /// stream before its free; an error of that memset as it runs poisons
    /// the context, so every later driver call returns it.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; [`Error::ZeroingFailed`] when the zeroing
    /// fails (the resource then tries once more as it frees the buffer, and
    /// keeps the block out of reuse if that fails too) or when an earlier
    /// failure is pending ([`Allocator::check`]).
    pub fn release(&self, mut buffer: Buffer) -> Result<()> {
        self.check_owned(&buffer)?;
        self.check()?;
        if buffer.is_sensitive() {
            if buffer.placement().is_host_accessible() {
                // Volatile writes: not elided although the memory is freed next.
                buffer.host_words_mut()?.zeroize();
            } else {
                let placement = buffer.placement();
                let bytes = buffer.bytes();
                self.zero(&mut buffer)
                    .map_err(|cause| Error::ZeroingFailed {
                        placement,
                        bytes,
                        cause: Box::new(cause),
                    })?;
            }
            buffer.mark_wiped();
        }
        drop(buffer);
        self.check()
    }

    /// A snapshot of the counters.
    pub fn statistics(&self) -> Statistics {
        self.statistics.snapshot()
    }

    /// Opens a statistics scope whose peaks cover only what happens until it
    /// is finished.
    pub fn statistics_scope(&self) -> StatisticsScope {
        self.statistics.scope()
    }

    /// The GPU this allocator serves, if any (its context and streams are the
    /// ones kernels must use).
    pub fn device(&self) -> Option<&GpuDevice> {
        self.parts.device.as_ref()
    }

    /// The residency manager (GPU allocators).
    pub fn residency(&self) -> Option<&Arc<Residency>> {
        self.parts.residency.as_ref()
    }

    /// The budget's accounting now (GPU allocators).
    pub fn residency_usage(&self) -> Option<ResidencyUsage> {
        self.parts.residency.as_ref().map(|r| r.usage())
    }

    /// Bytes the device pool holds from the driver now (live blocks and
    /// the freed memory it keeps: its physical pages, or the driver pool's
    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`); `None` without a pool.
    ///
    /// # Errors
    /// Driver errors.
    pub fn pool_reserved_bytes(&self) -> Result<Option<u64>> {
        self.parts.pool.as_ref().map(|p| p.reserved()).transpose()
    }

    /// The most bytes the device pool has held at once, by the pool's own
    /// count (the physical pages the paged pool created with `cuMemCreate`;
    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH` for the driver's pool); `None`
    /// without a pool.
    /// Under the `planned` policy everything hemem holds on the device is
    /// in the pool, so this is its device peak, measured independently of
    /// hemem's own accounting.
    ///
    /// # Errors
    /// Driver errors.
    pub fn pool_reserved_peak_bytes(&self) -> Result<Option<u64>> {
        self.parts
            .pool
            .as_ref()
            .map(|p| p.reserved_high())
            .transpose()
    }

    /// What the paged device pool has done so far (pages mapped and
    /// unmapped, waits, host time); `None` without a pool or with the
    /// driver's pool.
    pub fn pool_activity(&self) -> Option<crate::PoolActivity> {
        self.parts.pool.as_ref().and_then(|p| p.activity())
    }

    /// The placement policy's name (`None` for allocators made with
    /// [`Allocator::host`] or [`Allocator::from_parts`]).
    pub fn policy_name(&self) -> Option<&'static str> {
        self.parts.policy.as_ref().map(|p| p.name())
    }

    /// Where the placement policy's replay of a recording first departed
    /// from it (the `profiled` policy with
    /// [`Divergence::FallBackToStatic`](crate::policy::Divergence)); `None`
    /// otherwise.
    pub fn policy_divergence(&self) -> Option<crate::TraceError> {
        self.parts.policy.as_ref().and_then(|p| p.divergence())
    }

    /// The allocation trace so far, when recording.
    pub fn trace(&self) -> Option<Trace> {
        self.parts.trace.as_ref().map(TraceHandle::snapshot)
    }

    /// Writes the trace to the configured `record_trace` file; returns the
    /// path written, or `None` when not recording.
    ///
    /// # Errors
    /// [`crate::TraceError::Io`].
    pub fn write_trace(&self) -> Result<Option<PathBuf>> {
        match self.parts.path_and_trace() {
            Some((path, trace)) => {
                trace.snapshot().write_file(path)?;
                Ok(Some(path.to_owned()))
            }
            None => Ok(None),
        }
    }

    fn check_owned(&self, buffer: &Buffer) -> Result<()> {
        if buffer.is_owned_by(&self.top) {
            Ok(())
        } else {
            Err(Error::ForeignBuffer { id: buffer.id() })
        }
    }

    fn gpu_for(&self, buffer: &Buffer) -> Result<&GpuDevice> {
        self.parts.device.as_ref().ok_or(Error::WrongPlacement {
            placement: buffer.placement(),
            wanted: "host",
        })
    }

    /// Declares the buffers an operation is about to touch: managed ones are
    /// made resident (prefetched on the copy stream, ordered before the
    /// compute stream; under the `managed` policy left to fault in), streamed
    /// ones get a device slot and their fetch is waited for by the compute
    /// stream, others are evicted to stay under the budget, and none of the
    /// declared buffers is evicted while the returned guard lives. Pooled and
    /// host buffers need nothing and pass. A streamed buffer has a device
    /// address only between this call and the guard's drop: declare before
    /// reading addresses.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; [`Error::OverBudget`] when the declared
    /// buffers do not fit together; driver errors.
    pub fn prepare(&self, buffers: &[&Buffer]) -> Result<ResidencyGuard> {
        self.check()?;
        for b in buffers {
            self.check_owned(b)?;
        }
        match &self.parts.residency {
            Some(residency) => {
                let ids: Vec<AllocationId> = buffers
                    .iter()
                    .filter(|b| matches!(b.placement(), Placement::Managed | Placement::Streamed))
                    .map(|b| b.id())
                    .collect();
                residency.prepare(&ids)
            }
            None => Ok(ResidencyGuard::empty()),
        }
    }

    /// Copies `src` into `dst` starting at word `offset`. For device buffers
    /// the copy is queued on `dst`'s stream (through pinned staging) and this
    /// returns once `src` has been read.
    ///
    /// # Errors
    /// [`Error::TransferOutOfBounds`], [`Error::ForeignBuffer`], budget and
    /// driver errors.
    pub fn upload(&self, dst: &mut Buffer, offset: usize, src: &[u64]) -> Result<()> {
        self.check()?;
        self.check_owned(dst)?;
        if dst.placement().is_host_accessible() {
            return write_words(dst.host_words_mut()?, offset, src);
        }
        let gpu = self.gpu_for(dst)?.clone();
        if let (Some(master), Some(r)) = (dst.streamed_master_mut(), &self.parts.residency) {
            // A streamed object's master takes the words directly (keys
            // loaded from a file never touch the device here); a resident
            // device copy is updated too, in order.
            write_words(master, offset, src)?;
            if !r.master_written(dst.id()) {
                return Ok(());
            }
            let _guard = self.prepare(&[dst])?;
            return gpu.upload(dst, offset, src);
        }
        let _guard = self.prepare(&[dst])?;
        gpu.upload(dst, offset, src)?;
        self.written(dst);
        Ok(())
    }

    /// Copies words of `src` starting at word `offset` into `dst`; for device
    /// buffers waits for `src`'s stream (the result is ready on return).
    ///
    /// # Errors
    /// As [`Allocator::upload`].
    pub fn download(&self, src: &Buffer, offset: usize, dst: &mut [u64]) -> Result<()> {
        self.check()?;
        self.check_owned(src)?;
        if src.placement().is_host_accessible() {
            let words = src.host_words()?;
            let source = offset
                .checked_add(dst.len())
                .and_then(|end| words.get(offset..end))
                .ok_or(Error::TransferOutOfBounds {
                    offset,
                    words: dst.len(),
                    buffer_words: words.len(),
                })?;
            dst.copy_from_slice(source);
            return Ok(());
        }
        let gpu = self.gpu_for(src)?.clone();
        let _guard = self.prepare(&[src])?;
        gpu.download(src, offset, dst)
    }

    /// Copies `words` words from `src` (from word `src_offset`) to `dst` (from
    /// word `dst_offset`), in any combination of placements. Device-to-device
    /// copies are queued on `dst`'s stream, ordered against `src`'s.
    ///
    /// # Errors
    /// As [`Allocator::upload`].
    pub fn copy(
        &self,
        src: &Buffer,
        src_offset: usize,
        dst: &mut Buffer,
        dst_offset: usize,
        words: usize,
    ) -> Result<()> {
        self.check()?;
        self.check_owned(src)?;
        self.check_owned(dst)?;
        let out_of_bounds = |offset, buffer: &Buffer| Error::TransferOutOfBounds {
            offset,
            words,
            buffer_words: buffer.words(),
        };
        let src_range = src_offset
            .checked_add(words)
            .map(|end| src_offset..end)
            .ok_or_else(|| out_of_bounds(src_offset, src))?;
        match (
            src.placement().is_host_accessible(),
            dst.placement().is_host_accessible(),
        ) {
            (true, _) => {
                let from = src
                    .host_words()?
                    .get(src_range)
                    .ok_or_else(|| out_of_bounds(src_offset, src))?;
                self.upload(dst, dst_offset, from)
            }
            (false, true) => {
                let buffer_words = dst.words();
                let to = dst_offset
                    .checked_add(words)
                    .and_then(|end| {
                        dst.host_words_mut()
                            .ok()
                            .and_then(|w| w.get_mut(dst_offset..end))
                    })
                    .ok_or(Error::TransferOutOfBounds {
                        offset: dst_offset,
                        words,
                        buffer_words,
                    })?;
                let gpu = self.gpu_for(src)?.clone();
                let _guard = self.prepare(&[src])?;
                gpu.download(src, src_offset, to)
            }
            (false, false) => {
                let gpu = self.gpu_for(src)?.clone();
                let _guard = self.prepare(&[src, dst])?;
                gpu.copy(src, src_offset, dst, dst_offset, words)?;
                self.written(dst);
                Ok(())
            }
        }
    }

    /// Zeroes a buffer (device buffers: queued on their stream).
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`], budget and driver errors.
    pub fn zero(&self, dst: &mut Buffer) -> Result<()> {
        self.check()?;
        self.check_owned(dst)?;
        if dst.placement().is_host_accessible() {
            dst.host_words_mut()?.fill(0);
            return Ok(());
        }
        let gpu = self.gpu_for(dst)?.clone();
        let _guard = self.prepare(&[dst])?;
        gpu.zero(dst)?;
        self.written(dst);
        Ok(())
    }

    /// Declares that `buffer` will not be written again (a finished switching
    /// key or diagonal): a streamed object is then never written back when
    /// its device copy is dropped. Other placements ignore it.
    ///
    /// # Errors
    /// Driver errors of copying a device copy newer than the master back.
    pub fn seal(&self, buffer: &Buffer) -> Result<()> {
        match &self.parts.residency {
            Some(r) if buffer.placement() == Placement::Streamed => r.seal(buffer.id()),
            _ => Ok(()),
        }
    }

    /// Starts a phase of repeating work named `key` (a bootstrap, say) that
    /// runs `items` items stage by stage (a batch's size; 1 for one): the
    /// residency manager records the order in which its operations declare
    /// streamed objects and, on the phase's later runs, fetches them ahead of
    /// use. The phase ends when the guard drops. A no-op off the GPU.
    pub fn phase(&self, key: u64, items: usize) -> PhaseGuard {
        let residency = self.parts.residency.clone();
        if let Some(r) = &residency {
            r.begin_phase(key, items);
        }
        PhaseGuard { residency }
    }

    fn written(&self, buffer: &Buffer) {
        if buffer.placement() == Placement::Streamed
            && let Some(r) = &self.parts.residency
        {
            r.written(buffer.id());
        }
    }

    /// Moves a device buffer to `stream`: `stream` waits (an event) for the
    /// work queued so far on the buffer's stream, and from now on the buffer's
    /// transfers — and its free — are ordered on `stream`. This is how a block
    /// freed on one stream is safely reused on another. Host buffers are left
    /// as they are.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`], driver errors.
    pub fn hand_over(&self, buffer: &mut Buffer, stream: StreamId) -> Result<()> {
        self.check()?;
        self.check_owned(buffer)?;
        let Some(from) = buffer.stream() else {
            return Ok(());
        };
        let gpu = self.gpu_for(buffer)?;
        gpu.order(from, stream)?;
        buffer.set_stream(stream);
        Ok(())
    }
}

impl Parts {
    fn path_and_trace(&self) -> Option<(&Path, &TraceHandle)> {
        match (&self.trace_path, &self.trace) {
            (Some(path), Some(trace)) => Some((path.as_path(), trace)),
            _ => None,
        }
    }
}

impl fmt::Debug for Allocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Allocator")
            .field("top", &self.top)
            .field("policy", &self.policy_name())
            .finish_non_exhaustive()
    }
}

/// Copies `src` into `words` from word `offset`.
///
/// # Errors
/// [`Error::TransferOutOfBounds`] when it does not fit.
fn write_words(words: &mut [u64], offset: usize, src: &[u64]) -> Result<()> {
    let buffer_words = words.len();
    offset
        .checked_add(src.len())
        .and_then(|end| words.get_mut(offset..end))
        .ok_or(Error::TransferOutOfBounds {
            offset,
            words: src.len(),
            buffer_words,
        })?
        .copy_from_slice(src);
    Ok(())
}

/// A phase begun by [`Allocator::phase`]; dropping it ends the phase.
#[derive(Debug)]
#[must_use = "dropping the guard at once ends the phase"]
pub struct PhaseGuard {
    residency: Option<Arc<Residency>>,
}

impl PhaseGuard {
    /// Ends the phase as if its run had not happened (its caller gave it
    /// up, to run the work again otherwise): the run is not recorded, and
    /// the peak it reached does not shrink the streaming room of the runs
    /// after it.
    pub fn abandon(mut self) {
        if let Some(r) = self.residency.take() {
            r.abandon_phase();
        }
    }
}

impl Drop for PhaseGuard {
    fn drop(&mut self) {
        if let Some(r) = &self.residency {
            r.end_phase();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
