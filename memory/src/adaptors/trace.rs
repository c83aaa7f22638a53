//! The trace adaptor: records every allocation for the profiled policy and
//! `hemem trace analyze`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use crate::trace::{Trace, TraceRecord};
use crate::{AllocRequest, Allocation, AllocationId, MemoryResource, Placement, Result, StreamId};

#[derive(Debug, Default)]
struct Log {
    records: Vec<TraceRecord>,
    index: HashMap<AllocationId, usize>,
}

/// A shared handle to an adaptor's trace, usable after the adaptor moved
/// into a chain.
#[derive(Debug, Clone, Default)]
pub struct TraceHandle {
    log: Arc<Mutex<Log>>,
}

impl TraceHandle {
    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The trace so far (buffers still alive have no free time).
    pub fn snapshot(&self) -> Trace {
        Trace {
            records: self.lock().records.clone(),
        }
    }
}

/// Records id, class, size, placement, stream and allocation and free times
/// (nanoseconds since the adaptor was made) of everything passing through
/// it. Disabled, it only forwards.
#[derive(Debug)]
pub struct TraceAdaptor<R> {
    upstream: R,
    handle: TraceHandle,
    start: Instant,
    enabled: bool,
}

impl<R: MemoryResource> TraceAdaptor<R> {
    /// Wraps `upstream`, recording when `enabled`.
    pub fn new(upstream: R, enabled: bool) -> Self {
        Self {
            upstream,
            handle: TraceHandle::default(),
            start: Instant::now(),
            enabled,
        }
    }

    /// The wrapped resource.
    pub fn upstream(&self) -> &R {
        &self.upstream
    }

    /// A handle to the trace.
    pub fn handle(&self) -> TraceHandle {
        self.handle.clone()
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl<R: MemoryResource> MemoryResource for TraceAdaptor<R> {
    fn allocate(&self, request: &AllocRequest) -> Result<Allocation> {
        let allocation = self.upstream.allocate(request)?;
        if self.enabled {
            let record = TraceRecord {
                id: allocation.id,
                class: allocation.class,
                bytes: allocation.bytes as u64,
                placement: allocation.placement,
                stream: allocation.stream().unwrap_or(StreamId::Compute),
                alloc_ns: self.now_ns(),
                free_ns: None,
            };
            let mut log = self.handle.lock();
            let index = log.records.len();
            log.records.push(record);
            log.index.insert(record.id, index);
        }
        Ok(allocation)
    }

    fn deallocate(&self, allocation: Allocation) {
        if self.enabled {
            let now = self.now_ns();
            let mut log = self.handle.lock();
            if let Some(index) = log.index.remove(&allocation.id)
                && let Some(record) = log.records.get_mut(index)
            {
                record.free_ns = Some(now);
            }
        }
        self.upstream.deallocate(allocation);
    }

    fn placement(&self, request: &AllocRequest) -> Result<Option<Placement>> {
        self.upstream.placement(request)
    }

    fn held_bytes(&self, placement: Placement) -> Option<u64> {
        self.upstream.held_bytes(placement)
    }
}
