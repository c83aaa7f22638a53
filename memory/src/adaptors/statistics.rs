//! Counting adaptor, as RMM's `statistics_resource_adaptor`.

use crate::statistics::{Event, StatisticsHandle};
use crate::{AllocRequest, Allocation, MemoryResource, Placement, Result, Statistics};

/// Counts bytes, allocations and frees per class and placement of everything
/// that passes through it to `upstream`. The same counters hold the residency
/// manager's prefetch, eviction and pool-trim figures when the handle is
/// shared with it.
#[derive(Debug)]
pub struct StatisticsAdaptor<R> {
    upstream: R,
    handle: StatisticsHandle,
}

impl<R: MemoryResource> StatisticsAdaptor<R> {
    /// Wraps `upstream` with fresh counters.
    pub fn new(upstream: R) -> Self {
        Self::with_handle(upstream, StatisticsHandle::default())
    }

    /// Wraps `upstream`, counting into `handle` (shared with a residency
    /// manager).
    pub fn with_handle(upstream: R, handle: StatisticsHandle) -> Self {
        Self { upstream, handle }
    }

    /// The wrapped resource.
    pub fn upstream(&self) -> &R {
        &self.upstream
    }

    /// A handle to the counters, usable after the adaptor is moved into a chain.
    pub fn handle(&self) -> StatisticsHandle {
        self.handle.clone()
    }

    /// A snapshot of the counters.
    pub fn statistics(&self) -> Statistics {
        self.handle.snapshot()
    }
}

impl<R: MemoryResource> MemoryResource for StatisticsAdaptor<R> {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        let allocation = self.upstream.allocate(request)?;
        self.handle.record(
            allocation.class,
            allocation.placement,
            Event::Alloc {
                bytes: allocation.bytes as u64,
                sensitive: allocation.sensitive,
            },
        );
        Ok(allocation)
    }

    fn deallocate(&self, allocation: Allocation) {
        self.handle.record(
            allocation.class,
            allocation.placement,
            Event::Free {
                bytes: allocation.bytes as u64,
                sensitive: allocation.sensitive,
            },
        );
        self.upstream.deallocate(allocation);
    }

    fn placement(&self, request: &AllocRequest) -> Result<Option<Placement>> {
        self.upstream.placement(request)
    }

    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        self.upstream.held_bytes(placement)
    }
}
