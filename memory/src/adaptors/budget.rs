//! The budget adaptor: the one place where device bytes are admitted under
//! the device budget or refused, after RMM's `limiting_resource_adaptor`
//! (it counts what passes through it against a limit) and
//! `failure_callback_resource_adaptor` (a refusal may make room and retry).
//!
//! Who counts what:
//!
//! * **pooled blocks** — this adaptor, alone. Before it forwards a request it
//!   asks the upstream where the request will go
//!   ([`MemoryResource::placement`]); for the pool it reserves the bytes with
//!   the [`Residency`] manager, whose state holds the figures and decides
//!   whether they fit. It gives them back when the upstream refuses and when
//!   the block is freed, and after each pooled allocation it records what
//!   the pool really holds from the driver ([`MemoryResource::held_bytes`]:
//!   the pool reserves in chunks, and that rounding counts too). The
//!   resources below only allocate and free.
//! * **managed blocks** — counted when they are made resident. A new block
//!   has no pages on the device; a freed block handed out again while its
//!   pages are still there is admitted by this adaptor as it passes (counted
//!   resident at once when room can be made for it). A constant table
//!   (twiddles, modulus and conversion tables: kernels read them without
//!   declaring them) is admitted here too, brought to the device and
//!   counted until it is freed, never evicted; one that cannot fit is
//!   refused. Operations' declarations ([`crate::Allocator::prepare`]) make
//!   the others resident, through the same arithmetic. Freed blocks the
//!   managed resource keeps with their pages on the device (cached for
//!   reuse, or waiting for the GPU to reach their free) count too: after
//!   each managed allocation and free this adaptor records their bytes
//!   (the upstream's [`MemoryResource::held_bytes`]), and the manager has
//!   them freed before it evicts any live buffer.
//! * **streamed objects** — their masters are host memory; their device
//!   copies are counted by the residency manager when it fetches them.
//!
//! The residency manager holds a single count of device-resident bytes
//! ([`crate::ResidencyUsage::device_bytes`]) and a single test of whether
//! more bytes fit; this adaptor and the manager's own decisions are its only
//! callers.

use std::sync::Arc;

use crate::residency::Residency;
use crate::{AllocRequest, Allocation, Error, MemoryClass, MemoryResource, Placement, Result};

/// Keeps allocations under the device budget: reserves a request's device
/// bytes before forwarding it, and when they do not fit — or the upstream
/// refuses for want of device room (the pool's own out-of-memory) — asks the
/// residency manager to make room (trim the pool, evict least recently used
/// managed buffers and streamed objects no operation holds) and retries, a
/// bounded number of times. Then it gives up with [`Error::OverBudget`]:
/// what was requested, the budget, and the device-resident bytes per class
/// and placement.
///
/// Thread-safe: the reservation is taken under the manager's lock, so two
/// requests never both fit in the same room.
#[derive(Debug)]
pub struct BudgetAdaptor<R> {
    upstream: R,
    residency: Arc<Residency>,
    retries: u32,
}

impl<R: MemoryResource> BudgetAdaptor<R> {
    /// Retries after making room at most this many times per request.
    pub const DEFAULT_RETRIES: u32 = 6;

    /// Wraps `upstream`, enforcing `residency`'s budget.
    pub fn new(upstream: R, residency: Arc<Residency>) -> Self {
        Self {
            upstream,
            residency,
            retries: Self::DEFAULT_RETRIES,
        }
    }

    /// The wrapped resource.
    pub fn upstream(&self) -> &R {
        &self.upstream
    }

    /// The residency manager whose budget is enforced.
    pub fn residency(&self) -> &Arc<Residency> {
        &self.residency
    }

    /// Reserves `bytes` of `class` for `placement` (pooled bytes are the
    /// ones counted as they are allocated).
    fn reserve(&self, placement: Placement, class: MemoryClass, bytes: u64) -> Result<()> {
        match placement {
            Placement::DevicePool => self.residency.reserve_pool(class, bytes),
            _ => Ok(()),
        }
    }

    /// Counts the freed managed blocks the upstream keeps resident.
    fn observe_kept(&self) {
        if let Some(kept) = self.upstream.held_bytes(Placement::Managed) {
            self.residency.observe_managed_kept(kept);
        }
    }

    /// Gives back what [`BudgetAdaptor::reserve`] took.
    fn release(&self, placement: Placement, class: MemoryClass, bytes: u64) {
        if placement == Placement::DevicePool {
            self.residency.release_pool(class, bytes);
        }
    }

    /// One attempt: reserve for `planned` (the upstream's answer, if it
    /// gave one), forward, then settle the count with what the upstream
    /// did.
    fn attempt(&self, request: &AllocRequest, planned: Option<Placement>) -> Result<Allocation> {
        let (class, bytes) = (request.class, request.bytes as u64);
        if let Some(p) = planned {
            self.reserve(p, class, bytes)?;
        }
        let allocation = match self.upstream.allocate(request) {
            Ok(allocation) => allocation,
            Err(e) => {
                if let Some(p) = planned {
                    self.release(p, class, bytes);
                }
                return Err(e);
            }
        };
        let placement = allocation.placement;
        if planned != Some(placement) {
            // Placed elsewhere than announced (or unannounced): count what
            // was done, and undo it when it does not fit.
            if let Some(p) = planned {
                self.release(p, class, bytes);
            }
            if let Err(e) = self.reserve(placement, class, bytes) {
                self.upstream.deallocate(allocation);
                return Err(e);
            }
        }
        match placement {
            Placement::DevicePool => {
                if let Some(held) = self.upstream.held_bytes(placement) {
                    self.residency.observe_pool(held);
                }
            }
            Placement::Managed => {
                // A block taken from the kept ones is no longer kept.
                self.observe_kept();
                // A block handed out with its pages on the device counts as
                // resident at once when room can be made for it.
                if let Err(e) = self.residency.admit_managed(allocation.id) {
                    self.upstream.deallocate(allocation);
                    self.observe_kept();
                    return Err(e);
                }
            }
            _ => {}
        }
        Ok(allocation)
    }
}

/// Whether `error` is a refusal for want of device room.
fn needs_room(error: &Error) -> bool {
    matches!(
        error,
        Error::OverBudget { .. }
            | Error::OutOfMemory {
                placement: Placement::DevicePool,
                ..
            }
    )
}

impl<R: MemoryResource> MemoryResource for BudgetAdaptor<R> {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        let bytes = request.bytes as u64;
        let planned = self.upstream.placement(request)?;
        let mut attempt = 0;
        loop {
            let error = match self.attempt(request, planned) {
                Ok(allocation) => return Ok(allocation),
                Err(e) if needs_room(&e) => e,
                Err(e) => return Err(e),
            };
            let out_of_memory = matches!(error, Error::OutOfMemory { .. });
            let made_room =
                attempt < self.retries && self.residency.make_room(bytes, out_of_memory)?;
            if !made_room {
                // The pool never holds more than the budget (its maximum
                // size), so a pool out of memory is the budget's refusal too.
                return Err(self.residency.over_budget(bytes, request.class));
            }
            attempt += 1;
        }
    }

    fn deallocate(&self, allocation: Allocation) {
        let (placement, class, bytes) = (
            allocation.placement,
            allocation.class,
            allocation.bytes as u64,
        );
        self.upstream.deallocate(allocation);
        self.release(placement, class, bytes);
        if placement == Placement::Managed {
            self.observe_kept();
        }
    }

    fn placement(&self, request: &AllocRequest) -> Result<Option<Placement>> {
        self.upstream.placement(request)
    }

    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        self.upstream.held_bytes(placement)
    }
}

#[cfg(test)]
mod tests;
