//! What a trace says: lifetimes, peak pooled and managed bytes for a lifetime
//! threshold, and the profiled policy's decisions (§III-C of the hybrid-UM
//! paper: short-lived allocations go to the stream-ordered pool, long-lived
//! ones to managed memory, with a cap on the peak of pooled bytes).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use super::{Trace, TraceRecord};
use crate::{AllocationId, MemoryClass, Placement};

/// One bucket of a [`LifetimeHistogram`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifetimeBucket {
    /// Lifetimes below this bound (and at or above the previous bucket's);
    /// `None` for the last, open bucket.
    pub below: Option<Duration>,
    /// Allocations in the bucket.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Allocation lifetimes in decades from 1 µs to 100 s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifetimeHistogram {
    /// The buckets, shortest first.
    pub buckets: Vec<LifetimeBucket>,
    lifetimes: Vec<Duration>,
}

impl LifetimeHistogram {
    /// The bucket bounds.
    pub const BOUNDS: [Duration; 9] = [
        Duration::from_micros(1),
        Duration::from_micros(10),
        Duration::from_micros(100),
        Duration::from_millis(1),
        Duration::from_millis(10),
        Duration::from_millis(100),
        Duration::from_secs(1),
        Duration::from_secs(10),
        Duration::from_secs(100),
    ];

    /// The histogram of `trace`'s lifetimes (buffers never freed live to the
    /// end of the trace).
    pub fn from_trace(trace: &Trace) -> Self {
        let end = trace.end_ns();
        let mut buckets: Vec<LifetimeBucket> = Self::BOUNDS
            .iter()
            .map(|&b| LifetimeBucket {
                below: Some(b),
                count: 0,
                bytes: 0,
            })
            .chain(std::iter::once(LifetimeBucket {
                below: None,
                count: 0,
                bytes: 0,
            }))
            .collect();
        let mut lifetimes = Vec::with_capacity(trace.records.len());
        for r in &trace.records {
            let life = trace.lifetime_ns(r, end);
            lifetimes.push(life);
            let index = Self::BOUNDS
                .iter()
                .position(|&b| life < b)
                .unwrap_or(Self::BOUNDS.len());
            if let Some(bucket) = buckets.get_mut(index) {
                bucket.count += 1;
                bucket.bytes = bucket.bytes.saturating_add(r.bytes);
            }
        }
        Self { buckets, lifetimes }
    }

    /// Allocations in the trace.
    pub fn total(&self) -> u64 {
        self.lifetimes.len() as u64
    }

    /// The share (0 to 1) of allocations that lived less than `limit` (the
    /// paper reports about 92 % below one second for bootstrapping).
    pub fn share_below(&self, limit: Duration) -> f64 {
        if self.lifetimes.is_empty() {
            return 0.0;
        }
        let below = self.lifetimes.iter().filter(|&&l| l < limit).count();
        below as f64 / self.lifetimes.len() as f64
    }
}

/// Peak bytes live at once, by placement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeakBytes {
    /// Peak of pooled bytes.
    pub pool: u64,
    /// Peak of managed bytes.
    pub managed: u64,
}

/// Peak pooled and managed bytes when `placement` decides each record.
fn peaks(trace: &Trace, mut placement: impl FnMut(&TraceRecord) -> Placement) -> PeakBytes {
    // (time, order, bytes, pooled): at one time stamp, frees of allocations
    // that lived come first, then allocations, then frees of allocations of
    // zero lifetime (so they still count while they exist).
    let end = trace.end_ns();
    let mut events: Vec<(u64, u8, u64, bool)> = Vec::with_capacity(2 * trace.records.len());
    for r in &trace.records {
        let pooled = placement(r) == Placement::DevicePool;
        let free = r.free_ns.unwrap_or(end.saturating_add(1));
        events.push((r.alloc_ns, 1, r.bytes, pooled));
        events.push((free, if free > r.alloc_ns { 0 } else { 2 }, r.bytes, pooled));
    }
    events.sort_unstable();
    let (mut pool, mut managed) = (0u64, 0u64);
    let mut peak = PeakBytes::default();
    for (_, order, bytes, pooled) in events {
        let live = if pooled { &mut pool } else { &mut managed };
        if order == 1 {
            // Saturating: a trace's sizes are read from a file, and sizes
            // whose sum passes u64 peak at "more than any device", not at
            // a wrapped small number.
            *live = live.saturating_add(bytes);
        } else {
            *live = live.saturating_sub(bytes);
        }
        peak.pool = peak.pool.max(pool);
        peak.managed = peak.managed.max(managed);
    }
    peak
}

/// Peak pooled and managed bytes if every allocation that lived less than
/// `threshold` were pooled and the rest managed (no cap).
pub fn peaks_for_threshold(trace: &Trace, threshold: Duration) -> PeakBytes {
    let end = trace.end_ns();
    peaks(trace, |r| {
        if trace.lifetime_ns(r, end) < threshold {
            Placement::DevicePool
        } else {
            Placement::Managed
        }
    })
}

/// The profiled policy's analysis settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileSettings {
    /// Allocations living less than this are pooled (if the cap allows).
    pub lifetime_threshold: Duration,
    /// The most pooled bytes live at once.
    pub peak_pool_cap: u64,
}

impl Default for ProfileSettings {
    /// One second (the paper's observation point) and no cap.
    fn default() -> Self {
        Self {
            lifetime_threshold: Duration::from_secs(1),
            peak_pool_cap: u64::MAX,
        }
    }
}

/// One allocation's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The allocation id in the recording.
    pub id: AllocationId,
    /// Its class in the recording.
    pub class: MemoryClass,
    /// Its size in the recording.
    pub bytes: u64,
    /// Where the replay puts it.
    pub placement: Placement,
}

/// Per-allocation placements chosen from a recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfilePlan {
    /// The decisions, in the recording's order.
    pub decisions: Vec<Decision>,
    /// Peak bytes under these decisions.
    pub peaks: PeakBytes,
    /// The settings used.
    pub settings: ProfileSettings,
}

impl ProfilePlan {
    /// Chooses pool or managed for every allocation of `trace`: in order of
    /// allocation time, an allocation whose lifetime is below the threshold
    /// is pooled if the pooled bytes live at that moment plus its own stay
    /// within the cap; everything else is managed. (Pooled bytes only grow at
    /// allocations, so checking there bounds the peak.)
    pub fn analyze(trace: &Trace, settings: ProfileSettings) -> Self {
        let end = trace.end_ns();
        let mut order: Vec<usize> = (0..trace.records.len()).collect();
        order.sort_by_key(|&i| {
            trace
                .records
                .get(i)
                .map_or((u64::MAX, u64::MAX), |r| (r.alloc_ns, r.id.0))
        });
        let mut placements = vec![Placement::Managed; trace.records.len()];
        let mut active: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
        let mut live_pool = 0u64;
        for i in order {
            let Some(r) = trace.records.get(i) else {
                continue;
            };
            while let Some(&Reverse((free, bytes))) = active.peek() {
                if free > r.alloc_ns {
                    break;
                }
                active.pop();
                live_pool = live_pool.saturating_sub(bytes);
            }
            let short = trace.lifetime_ns(r, end) < settings.lifetime_threshold;
            let fits = live_pool
                .checked_add(r.bytes)
                .is_some_and(|b| b <= settings.peak_pool_cap);
            if short && fits {
                if let Some(p) = placements.get_mut(i) {
                    *p = Placement::DevicePool;
                }
                live_pool += r.bytes;
                active.push(Reverse((
                    r.free_ns.unwrap_or(end.saturating_add(1)),
                    r.bytes,
                )));
            }
        }
        let decisions: Vec<Decision> = trace
            .records
            .iter()
            .zip(&placements)
            .map(|(r, &placement)| Decision {
                id: r.id,
                class: r.class,
                bytes: r.bytes,
                placement,
            })
            .collect();
        let mut next = placements.iter();
        let peaks = peaks(trace, |_| {
            next.next().copied().unwrap_or(Placement::Managed)
        });
        Self {
            decisions,
            peaks,
            settings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StreamId;

    fn record(id: u64, bytes: u64, alloc_ns: u64, free_ns: Option<u64>) -> TraceRecord {
        TraceRecord {
            id: AllocationId(id),
            class: MemoryClass::Temporary,
            bytes,
            placement: Placement::Host,
            stream: StreamId::Compute,
            alloc_ns,
            free_ns,
        }
    }

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;

    fn trace() -> Trace {
        Trace {
            records: vec![
                record(1, 100, 0, None),               // lives to the end: 10 s
                record(2, 10, MS, Some(2 * MS)),       // 1 ms
                record(3, 20, MS, Some(3 * MS)),       // 2 ms
                record(4, 30, 2 * MS, Some(2 * S)),    // ~2 s
                record(5, 40, 5 * S, Some(5 * S + 5)), // 5 ns
                record(6, 50, 10 * S, Some(10 * S)),   // 0 ns
            ],
        }
    }

    #[test]
    fn histogram_counts_lifetimes_and_shares() {
        let h = LifetimeHistogram::from_trace(&trace());
        let counts: Vec<u64> = h.buckets.iter().map(|b| b.count).collect();
        // <1µs: 5, 6; <10ms: 2, 3; <10 s: 4; <100 s: 1 (exactly 10 s).
        assert_eq!(counts, vec![2, 0, 0, 0, 2, 0, 0, 1, 1, 0]);
        assert_eq!(h.total(), 6);
        assert!((h.share_below(Duration::from_secs(1)) - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!(h.buckets.last().map(|b| b.below), Some(None));
    }

    /// Sizes read from a trace file whose sum passes u64 peak at u64::MAX
    /// (the sum overflowed: a debug panic, a wrapped peak in release).
    #[test]
    fn peaks_of_sizes_past_u64_saturate() {
        let huge = 10_000_000_000_000_000_000;
        let t = Trace {
            records: vec![record(1, huge, 0, Some(S)), record(2, huge, 1, Some(S))],
        };
        assert_eq!(peaks_for_threshold(&t, Duration::ZERO).managed, u64::MAX);
    }

    #[test]
    fn peaks_follow_the_threshold() {
        let t = trace();
        // Nothing pooled: 1, 3 and 4 are live together at 2 ms (2 was freed
        // then), and 1 and 6 at 10 s.
        assert_eq!(
            peaks_for_threshold(&t, Duration::ZERO),
            PeakBytes {
                pool: 0,
                managed: 150
            }
        );
        // Below 1 s pooled: 2, 3 (30 at once), 5, 6; managed 1 and 4.
        assert_eq!(
            peaks_for_threshold(&t, Duration::from_secs(1)),
            PeakBytes {
                pool: 50,
                managed: 130
            }
        );
    }

    #[test]
    fn profile_plan_pools_short_lived_allocations_under_the_cap() {
        let t = trace();
        use Placement::{DevicePool as P, Managed as M};
        let placements_for = |cap: u64| {
            let plan = ProfilePlan::analyze(
                &t,
                ProfileSettings {
                    lifetime_threshold: Duration::from_secs(1),
                    peak_pool_cap: cap,
                },
            );
            let placements: Vec<Placement> = plan.decisions.iter().map(|d| d.placement).collect();
            (placements, plan.peaks.pool)
        };
        // Cap 45: 2 and 3 fit together (30); 5 fits once they are freed (40);
        // 6 (50 bytes) never fits.
        assert_eq!(placements_for(45), (vec![M, P, P, M, P, M], 40));
        // Cap 25: 3 would make 30 while 2 is live; 5 and 6 are too large.
        assert_eq!(placements_for(25), (vec![M, P, M, M, M, M], 10));
        let uncapped = ProfilePlan::analyze(&t, ProfileSettings::default());
        let placements: Vec<Placement> = uncapped.decisions.iter().map(|d| d.placement).collect();
        assert_eq!(placements, vec![M, P, P, M, P, P]);
        assert_eq!(
            uncapped.peaks,
            peaks_for_threshold(&t, Duration::from_secs(1))
        );
    }
}
