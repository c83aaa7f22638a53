//! The `Managed` placement: CUDA managed memory, advised by class.
//!
//! This resource allocates, advises, caches and frees; it counts nothing
//! against the device budget. It registers each block with the residency
//! manager, which prefetches and evicts it and counts it while it has made
//! it resident; a block handed out again with its pages still on the device
//! is registered as such, and the [`BudgetAdaptor`](crate::BudgetAdaptor)
//! admits it as resident when it fits. Blocks waiting in the cache or for
//! their free keep the pages they had on the device: this resource reports
//! their bytes ([`MemoryResource::held_bytes`]), the budget adaptor counts
//! them, and the residency manager has them freed
//! ([`ManagedResource::release_kept`]) before it evicts a live buffer.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use crate::cuda::{Event, GpuDevice};
use crate::policy::PlacementPolicy;
use crate::residency::Residency;
use crate::resource::ZeroingFailures;
use crate::{
    AllocRequest, Allocation, DeviceError, DeviceMemory, DevicePtr, Error, Memory, MemoryClass,
    MemoryResource, Placement, Result, StreamId,
};

/// A freed block waiting for the work queued before its free.
struct PendingFree {
    ptr: DevicePtr,
    bytes: u64,
    /// The class it held, when it may be reused (no read-mostly advice, not
    /// sensitive); `None` frees it once its events complete.
    reusable: Option<MemoryClass>,
    /// Whether its pages were on the device when it was freed.
    resident: bool,
    events: [Event; 2],
}

/// A freed block whose work completed, kept for reuse by a request of the
/// same size and class.
struct Cached {
    ptr: DevicePtr,
    bytes: u64,
    class: MemoryClass,
    resident: bool,
}

#[derive(Default)]
struct State {
    allocated: u64,
    pending: Vec<PendingFree>,
    cached: Vec<Cached>,
    cached_bytes: u64,
}

/// Managed memory (`cuMemAllocManaged`), advised by class as the policy says
/// (read-mostly advice is left to the residency manager, which sets it when a
/// buffer comes to the device and unsets it before an eviction; preferred
/// location device is set at allocation). Registered with the residency
/// manager, which prefetches and evicts it.
///
/// Total managed memory is capped (by default at the GPU's free memory when
/// the allocator was made; a request past the cap fails with
/// [`Error::ManagedCapExceeded`]) unless driver-managed oversubscription was
/// opted in to.
///
/// `cuMemFree` of managed memory may synchronise the device, so a freed block
/// is kept until events recorded on both streams behind its last uses
/// complete, and freed by a later call (or when the resource drops). Sensitive
/// memory is zeroed on the compute stream first (behind any eviction still on
/// the copy stream), is never cached for reuse, and a sensitive request never
/// gets a cached block. A zeroing the driver refuses keeps the block out of
/// reuse (it is never freed) and is reported by the allocator's next fallible
/// call.
///
/// Blocks without read-mostly advice (ciphertexts, plaintexts: what churns)
/// are not freed but cached, up to the cache limit (the allocator gives a
/// sixteenth of the device budget), and
/// handed to the next request of the same size and class: a fresh
/// `cuMemAllocManaged` costs about 12 µs plus page population, and its
/// `cuMemFree` may synchronise the device. A cached block is counted as
/// kept (not as a live buffer) while it waits; when it is reused, a
/// block that was resident when freed is registered as on the device and
/// the budget adaptor counts it as resident at once (room made under the
/// budget), so its first use needs no prefetch and no copy-stream round
/// trip. A block whose free the GPU has not reached yet is
/// handed out too, in stream order as a pool would (the request's stream
/// waits on the device for the free's events): when the host runs ahead of
/// the GPU, an operation's output otherwise never finds a completed block of
/// its size and gets fresh memory every time.
pub struct ManagedResource {
    gpu: GpuDevice,
    residency: Arc<Residency>,
    policy: Arc<dyn PlacementPolicy>,
    cap: Option<u64>,
    cache_limit: u64,
    state: Mutex<State>,
    zeroing: ZeroingFailures,
}

impl fmt::Debug for ManagedResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagedResource")
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl ManagedResource {
    /// A managed resource on `gpu`; `cap` bounds total managed bytes (`None`:
    /// driver-managed oversubscription), `cache_limit` the bytes of freed
    /// blocks kept for reuse.
    ///
    /// # Errors
    /// [`DeviceError::ManagedUnsupported`] without concurrent managed access.
    pub(crate) fn new(
        gpu: &GpuDevice,
        residency: Arc<Residency>,
        policy: Arc<dyn PlacementPolicy>,
        cap: Option<u64>,
        cache_limit: u64,
        zeroing: ZeroingFailures,
    ) -> Result<Self> {
        if !gpu.info().concurrent_managed_access {
            return Err(DeviceError::ManagedUnsupported {
                ordinal: gpu.ordinal(),
            }
            .into());
        }
        Ok(Self {
            gpu: gpu.clone(),
            residency,
            policy,
            cap,
            cache_limit,
            state: Mutex::new(State::default()),
            zeroing,
        })
    }

    /// Moves the pending blocks whose events completed to the cache (or
    /// frees them); with `wait`, waits for all of them and frees everything.
    fn reap(&self, state: &mut State, wait: bool) {
        let mut kept = Vec::with_capacity(state.pending.len());
        for p in std::mem::take(&mut state.pending) {
            let done = if wait {
                p.events.iter().all(|e| e.synchronize().is_ok())
            } else {
                p.events.iter().all(|e| e.is_complete().unwrap_or(false))
            };
            match (done, p.reusable) {
                (true, Some(class))
                    if !wait && state.cached_bytes + p.bytes <= self.cache_limit =>
                {
                    state.cached_bytes += p.bytes;
                    state.cached.push(Cached {
                        ptr: p.ptr,
                        bytes: p.bytes,
                        class,
                        resident: p.resident,
                    });
                }
                (true, _) => {
                    self.gpu.defer(self.gpu.free_managed(p.ptr));
                    state.allocated = state.allocated.saturating_sub(p.bytes);
                }
                (false, _) => kept.push(p),
            }
        }
        state.pending = kept;
        if wait {
            self.free_cached(state);
        }
    }

    /// Resident bytes of the freed blocks `state` keeps.
    fn kept_resident(state: &State) -> u64 {
        let pending = state.pending.iter().filter(|p| p.resident).map(|p| p.bytes);
        let cached = state.cached.iter().filter(|c| c.resident).map(|c| c.bytes);
        pending.chain(cached).sum()
    }

    /// Frees every kept block — the cached ones, and the pending ones once
    /// the GPU reaches their frees (the host waits for their events) — and
    /// returns the resident bytes given back: what the residency manager
    /// calls when the budget needs their room, before it evicts a live
    /// buffer ([`Residency::set_kept_release`]).
    pub(crate) fn release_kept(&self) -> u64 {
        let mut state = self.lock();
        let kept = Self::kept_resident(&state);
        self.reap(&mut state, true);
        kept
    }

    /// Frees every cached block.
    fn free_cached(&self, state: &mut State) {
        for c in std::mem::take(&mut state.cached) {
            self.gpu.defer(self.gpu.free_managed(c.ptr));
            state.allocated = state.allocated.saturating_sub(c.bytes);
        }
        state.cached_bytes = 0;
    }

    /// A freed block of the request's size and class to hand out again: a
    /// cached one, else one still waiting for the work queued before its
    /// free. The latter is reused in stream order, as a pool reuses memory:
    /// the request's stream waits (on the device) for the events recorded on
    /// both streams at the free, so the new owner's work queues behind the
    /// old owner's last kernels and any eviction still on the copy stream,
    /// and the host never waits. (Managed memory is only ever reached through
    /// stream-ordered work: kernels and copies.) Sensitive requests get fresh
    /// memory.
    fn take_reusable(&self, state: &mut State, request: &AllocRequest) -> Result<Option<Cached>> {
        if request.sensitive {
            return Ok(None);
        }
        let bytes = request.bytes as u64;
        if let Some(i) = state
            .cached
            .iter()
            .position(|c| c.bytes == bytes && c.class == request.class)
        {
            let block = state.cached.swap_remove(i);
            state.cached_bytes -= block.bytes;
            return Ok(Some(block));
        }
        let Some(i) = state
            .pending
            .iter()
            .position(|p| p.bytes == bytes && p.reusable == Some(request.class))
        else {
            return Ok(None);
        };
        let pending = state.pending.swap_remove(i);
        for event in &pending.events {
            if let Err(e) = self.gpu.wait_event(request.stream, event) {
                state.pending.push(pending);
                return Err(e);
            }
        }
        Ok(Some(Cached {
            ptr: pending.ptr,
            bytes,
            class: request.class,
            resident: pending.resident,
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl MemoryResource for ManagedResource {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        if request.bytes == 0 {
            return Err(Error::ZeroSize {
                class: request.class,
            });
        }
        let bytes = request.bytes as u64;
        let mut state = self.lock();
        self.reap(&mut state, false);
        if let Some(block) = self.take_reusable(&mut state, request)? {
            drop(state);
            let advice = self.policy.advice(request.class);
            if block.resident {
                // Still on the device: the budget adaptor counts it as
                // resident at once when it fits, so its first use queues no
                // prefetch.
                self.residency.register_managed_on_device(
                    request.id,
                    request.class,
                    block.ptr,
                    bytes,
                    advice,
                );
            } else {
                self.residency.register_managed(
                    request.id,
                    request.class,
                    block.ptr,
                    bytes,
                    advice,
                );
            }
            return Ok(Allocation::new(
                request,
                Placement::Managed,
                Memory::Managed(DeviceMemory {
                    ptr: block.ptr,
                    stream: request.stream,
                }),
            ));
        }
        if let Some(cap) = self.cap
            && state.allocated.saturating_add(bytes) > cap
        {
            self.free_cached(&mut state);
        }
        if let Some(cap) = self.cap
            && state.allocated.saturating_add(bytes) > cap
        {
            return Err(Error::ManagedCapExceeded {
                requested: bytes,
                allocated: state.allocated,
                cap,
            });
        }
        let ptr = self
            .gpu
            .allocate_managed(request.bytes)
            .map_err(|e| match e {
                Error::Device(DeviceError::Driver { error, .. })
                    if error.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY =>
                {
                    Error::OutOfMemory {
                        requested: request.bytes,
                        placement: Placement::Managed,
                        class: request.class,
                    }
                }
                other => other,
            })?;
        let advice = self.policy.advice(request.class);
        if advice.prefer_device
            && let Err(e) = self.gpu.advise_preferred_device(ptr, request.bytes)
        {
            self.gpu.defer(self.gpu.free_managed(ptr));
            return Err(e);
        }
        state.allocated += bytes;
        drop(state);
        self.residency
            .register_managed(request.id, request.class, ptr, bytes, advice);
        Ok(Allocation::new(
            request,
            Placement::Managed,
            Memory::Managed(DeviceMemory {
                ptr,
                stream: request.stream,
            }),
        ))
    }

    fn deallocate(&self, allocation: Allocation) {
        let Memory::Managed(memory) = allocation.memory else {
            return;
        };
        let resident = self.residency.is_resident(allocation.id) == Some(true);
        self.residency.unregister_managed(allocation.id);
        let reusable = (!allocation.sensitive && !self.policy.advice(allocation.class).read_mostly)
            .then_some(allocation.class);
        if allocation.needs_zeroing() {
            // Behind any eviction still queued on the copy stream.
            let zeroed = self
                .gpu
                .order(StreamId::Copy, StreamId::Compute)
                .and_then(|()| {
                    self.gpu.zero_memory(
                        DeviceMemory {
                            ptr: memory.ptr,
                            stream: StreamId::Compute,
                        },
                        allocation.bytes,
                    )
                });
            if let Err(cause) = zeroed {
                // Never hand secret words to the next owner or back to the
                // driver: the block stays allocated, and the failure is
                // reported.
                self.zeroing
                    .record(Placement::Managed, allocation.bytes, cause);
                return;
            }
        }
        let events = (
            self.gpu.record_event(StreamId::Compute),
            self.gpu.record_event(StreamId::Copy),
        );
        let mut state = self.lock();
        match events {
            (Ok(a), Ok(b)) => state.pending.push(PendingFree {
                ptr: memory.ptr,
                bytes: allocation.bytes as u64,
                reusable,
                resident,
                events: [a, b],
            }),
            (a, b) => {
                // Without events, wait for both streams before freeing.
                self.gpu.defer(a.map(|_| ()));
                self.gpu.defer(b.map(|_| ()));
                self.gpu.defer(self.gpu.synchronize(StreamId::Compute));
                self.gpu.defer(self.gpu.synchronize(StreamId::Copy));
                self.gpu.defer(self.gpu.free_managed(memory.ptr));
                state.allocated = state.allocated.saturating_sub(allocation.bytes as u64);
            }
        }
        self.reap(&mut state, false);
    }

    fn placement(&self, _request: &AllocRequest) -> Result<Option<Placement>> {
        Ok(Some(Placement::Managed))
    }

    /// The resident bytes of the freed blocks kept: cached for reuse, or
    /// waiting for the GPU to reach their free. The budget counts them.
    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        (placement == Placement::Managed).then(|| Self::kept_resident(&self.lock()))
    }
}

impl Drop for ManagedResource {
    fn drop(&mut self) {
        let mut state = std::mem::take(&mut *self.lock());
        self.reap(&mut state, true);
    }
}
