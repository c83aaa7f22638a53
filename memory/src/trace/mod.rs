//! Allocation traces: what was allocated, where, and for how long.
//!
//! A trace is written by the [`crate::TraceAdaptor`] of a recording run, as
//! CSV with the header `id,class,bytes,placement,stream,alloc_ns,free_ns`
//! (times in nanoseconds since the allocator was made; `free_ns` empty for
//! buffers still alive at the end). [`analysis`] reads it: the lifetime
//! histogram, peak pooled and managed bytes against a lifetime threshold,
//! and the per-allocation decisions the profiled policy (§III-C) replays.

pub mod analysis;
mod csv;

pub use analysis::{
    Decision, LifetimeBucket, LifetimeHistogram, PeakBytes, ProfilePlan, ProfileSettings,
};
pub use csv::HEADER;

use std::time::Duration;

use crate::{AllocationId, MemoryClass, Placement, StreamId};

/// One allocation of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRecord {
    /// The allocation id (its 1-based index in the run).
    pub id: AllocationId,
    /// The class of the data.
    pub class: MemoryClass,
    /// Bytes requested.
    pub bytes: u64,
    /// Where it was placed in the recording run.
    pub placement: Placement,
    /// The stream it was ordered on.
    pub stream: StreamId,
    /// Nanoseconds from the allocator's creation to the allocation.
    pub alloc_ns: u64,
    /// Nanoseconds from the allocator's creation to the free, if freed.
    pub free_ns: Option<u64>,
}

/// A recorded sequence of allocations, in allocation order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// The records.
    pub records: Vec<TraceRecord>,
}

impl Trace {
    /// The last time stamp in the trace (an allocation or a free).
    pub fn end_ns(&self) -> u64 {
        self.records
            .iter()
            .map(|r| r.free_ns.unwrap_or(r.alloc_ns).max(r.alloc_ns))
            .max()
            .unwrap_or(0)
    }

    /// How long `record` lived: to its free, or to the end of the trace.
    pub fn lifetime(&self, record: &TraceRecord) -> Duration {
        self.lifetime_ns(record, self.end_ns())
    }

    pub(crate) fn lifetime_ns(&self, record: &TraceRecord, end_ns: u64) -> Duration {
        let end = record.free_ns.unwrap_or(end_ns);
        Duration::from_nanos(end.saturating_sub(record.alloc_ns))
    }
}
