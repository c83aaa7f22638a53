//! What the benchmark commands measure around a workload: the memory
//! system's counters before and after ([`Snapshot`], [`Movement`]), peak
//! bytes per class ([`peaks`]), the process's peak resident set
//! ([`peak_rss_bytes`]), timed runs ([`time_runs`]) and their summary
//! ([`Summary`]). `hemem bootstrap`, `hemem bench oversub` and
//! `hemem bench bm-bootstrap` share them.

use std::time::Instant;

use hemem_ckks::prelude::Context;
use hemem_memory::{
    DriverTime, MemoryClass, Placement, PoolActivity, ResidencyUsage, Statistics, StreamId,
};
use serde::{Deserialize, Serialize};

use crate::Result;

/// The memory system's counters at one moment, to tell what happened
/// between two moments.
#[derive(Debug, Clone)]
pub struct Snapshot {
    statistics: Statistics,
    driver: Option<DriverTime>,
    usage: Option<ResidencyUsage>,
    pool: Option<PoolActivity>,
}

/// What the memory system did between two snapshots.
#[derive(Debug, Clone, Default)]
pub struct Movement {
    /// Managed bytes prefetched to the device (buffers that had been
    /// evicted; 0 under `managed`, whose pages fault in instead).
    pub to_device: u64,
    /// Managed bytes evicted to the host.
    pub evicted: u64,
    /// Buffers evicted.
    pub evictions: u64,
    /// Times the device pool was trimmed.
    pub pool_trims: u64,
    /// Host milliseconds in the residency driver's calls, by kind (GPU only).
    pub driver_ms: Option<serde_json::Map<String, serde_json::Value>>,
    /// Bytes evicted per memory class (classes with none left out).
    pub evicted_by_class: serde_json::Map<String, serde_json::Value>,
    /// GPU runs under a budget: the streaming arena and the pool's refusals
    /// between the snapshots (counts are differences; `arena_bytes`,
    /// `others_peak` and `refusal_headroom` are the values at the end).
    pub residency: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Snapshot {
    /// The counters of `context`'s memory system now.
    pub fn take(context: &Context) -> Self {
        let residency = context.backend().allocator().residency();
        Self {
            statistics: context.memory_statistics(),
            driver: residency.map(|r| r.driver_time()),
            usage: residency.map(|r| r.usage()),
            pool: context.backend().allocator().pool_activity(),
        }
    }

    /// What happened between `before` and this snapshot.
    pub fn since(&self, before: &Self) -> Movement {
        let (now, then) = (self.statistics.total(), before.statistics.total());
        let delta_ms = |after: u64, before: u64| {
            serde_json::Value::from(after.saturating_sub(before) as f64 / 1e6)
        };
        let driver_ms = self.driver.zip(before.driver).map(|(a, b)| {
            [
                ("order", delta_ms(a.order_ns, b.order_ns)),
                ("trim", delta_ms(a.trim_ns, b.trim_ns)),
                ("advise_on", delta_ms(a.advise_on_ns, b.advise_on_ns)),
                ("advise_off", delta_ms(a.advise_off_ns, b.advise_off_ns)),
                ("to_device", delta_ms(a.to_device_ns, b.to_device_ns)),
                ("to_host", delta_ms(a.to_host_ns, b.to_host_ns)),
                ("prepare", delta_ms(a.prepare_ns, b.prepare_ns)),
            ]
            .into_iter()
            .chain(
                self.pool
                    .zip(before.pool)
                    .map(|(a, b)| {
                        [
                            ("pool", delta_ms(a.host_ns, b.host_ns)),
                            ("pool_wait", delta_ms(a.host_wait_ns, b.host_wait_ns)),
                            ("pool_mapping", delta_ms(a.mapping_ns, b.mapping_ns)),
                        ]
                    })
                    .into_iter()
                    .flatten(),
            )
            .map(|(k, v)| (k.to_owned(), v))
            .collect()
        });
        let evicted_by_class = MemoryClass::ALL
            .into_iter()
            .map(|c| {
                let b = self
                    .statistics
                    .class(c)
                    .prefetched_to_host
                    .saturating_sub(before.statistics.class(c).prefetched_to_host);
                (c.name().to_owned(), serde_json::Value::from(b))
            })
            .filter(|(_, b)| b.as_u64() != Some(0))
            .collect();
        let pool = self.pool.zip(before.pool).map(|(a, b)| {
            [
                (
                    "pool_pages_mapped",
                    a.pages_mapped.saturating_sub(b.pages_mapped),
                ),
                (
                    "pool_pages_unmapped",
                    a.pages_unmapped.saturating_sub(b.pages_unmapped),
                ),
                (
                    "pool_pages_created",
                    a.pages_created.saturating_sub(b.pages_created),
                ),
                ("pool_host_waits", a.host_waits.saturating_sub(b.host_waits)),
                (
                    "pool_stream_waits",
                    a.stream_waits.saturating_sub(b.stream_waits),
                ),
            ]
        });
        let residency = self.usage.zip(before.usage).map(|(a, b)| {
            let delta = |after: u64, before: u64| after.saturating_sub(before);
            [
                ("arena_bytes", a.arena_bytes),
                ("arena_chunks", a.arena_chunks),
                (
                    "arena_chunks_added",
                    delta(a.arena_chunks_added, b.arena_chunks_added),
                ),
                (
                    "arena_chunks_released",
                    delta(a.arena_chunks_released, b.arena_chunks_released),
                ),
                (
                    "arena_released_bytes",
                    delta(a.arena_released_bytes, b.arena_released_bytes),
                ),
                ("pool_refusals", delta(a.pool_refusals, b.pool_refusals)),
                ("refusal_headroom", a.refusal_headroom),
                ("others_peak", a.others_peak),
                ("departures", delta(a.departures, b.departures)),
                ("zero_copy_uses", delta(a.zero_copy_uses, b.zero_copy_uses)),
                (
                    "prefetched_bytes",
                    delta(a.prefetched_bytes, b.prefetched_bytes),
                ),
            ]
            .into_iter()
            .chain(pool.into_iter().flatten())
            .map(|(k, v)| (k.to_owned(), serde_json::Value::from(v)))
            .collect()
        });
        Movement {
            to_device: now
                .prefetched_to_device
                .saturating_sub(then.prefetched_to_device),
            evicted: now
                .prefetched_to_host
                .saturating_sub(then.prefetched_to_host),
            evictions: now.evictions.saturating_sub(then.evictions),
            pool_trims: self
                .statistics
                .pool_trims()
                .saturating_sub(before.statistics.pool_trims()),
            driver_ms,
            evicted_by_class,
            residency,
        }
    }
}

/// The process's peak resident set size (Linux `VmHWM` in
/// `/proc/self/status`, read with the `procfs` crate); `None` on other
/// systems or when `/proc` cannot be read.
pub fn peak_rss_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let status = procfs::process::Process::myself().ok()?.status().ok()?;
        status.vmhwm.and_then(|kib| kib.checked_mul(1024))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Peak bytes per class; and with `device`, pooled plus managed peaks per
/// class.
pub fn peaks(
    statistics: &Statistics,
    device: bool,
) -> (
    serde_json::Map<String, serde_json::Value>,
    Option<serde_json::Map<String, serde_json::Value>>,
) {
    let all = statistics
        .peak_bytes_by_class()
        .into_iter()
        .map(|(c, b)| (c.name().to_owned(), serde_json::Value::from(b)))
        .collect();
    let device = device.then(|| {
        MemoryClass::ALL
            .into_iter()
            .map(|c| {
                let b = statistics.get(c, Placement::DevicePool).bytes.peak
                    + statistics.get(c, Placement::Managed).bytes.peak;
                (c.name().to_owned(), serde_json::Value::from(b))
            })
            .collect()
    });
    (all, device)
}

/// The most bytes pooled on the device at once, over every class: the
/// `profiled` policy's "peak pooled memory" (0 on the CPU).
pub fn peak_pooled_bytes(statistics: &Statistics) -> u64 {
    statistics.placement(Placement::DevicePool).bytes.peak
}

/// Waits for both of the GPU's streams (fetches ahead of use run on the
/// copy stream), so that CUPTI has seen every copy queued so far; on the
/// CPU, for the backend.
///
/// # Errors
/// Driver errors.
pub fn settle_copies(context: &Context) -> Result<()> {
    context.synchronize()?;
    if let Some(gpu) = context.backend().allocator().device() {
        gpu.synchronize(StreamId::Copy)
            .map_err(hemem_ckks::Error::from)?;
    }
    Ok(())
}

/// Runs `f` `iterations` times, timed one by one: `setup` makes each run's
/// input untimed, and the backend is synchronised before the clock starts
/// and after `f` (a GPU run's time is queue to completion). Milliseconds per
/// run. Warm-up is a first call whose times are dropped.
///
/// # Errors
/// `setup`'s and `f`'s errors, synchronisation errors.
pub fn time_runs<S, T>(
    context: &Context,
    iterations: usize,
    mut setup: impl FnMut() -> Result<S>,
    mut f: impl FnMut(S) -> Result<T>,
) -> Result<Vec<f64>> {
    // Not sized by the count: a count past memory would abort before the
    // first run (the runs themselves take as long as asked).
    let mut times = Vec::with_capacity(iterations.min(1 << 16));
    for _ in 0..iterations {
        let input = setup()?;
        context.synchronize()?;
        let start = Instant::now();
        let out = f(input)?;
        context.synchronize()?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
        drop(out);
    }
    Ok(times)
}

/// Median, minimum and maximum of a set of times.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The median (the mean of the two middle values for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Summary {
    /// The summary of `values`; `None` when there are none (or a NaN).
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let upper = *sorted.get(sorted.len() / 2)?;
        let median = match sorted.len() % 2 {
            0 => (sorted.get(sorted.len() / 2 - 1)? + upper) / 2.0,
            _ => upper,
        };
        Some(Self {
            median,
            min: *sorted.first()?,
            max: *sorted.last()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On Linux the peak resident set is read and at least what this test
    /// has touched.
    #[test]
    #[cfg(target_os = "linux")]
    fn peak_rss_is_read_on_linux() {
        let touched = std::hint::black_box(vec![1u8; 8 << 20]);
        let peak = peak_rss_bytes().expect("VmHWM");
        assert!(peak >= touched.len() as u64, "{peak}");
    }

    #[test]
    fn summaries() {
        assert_eq!(
            Summary::of(&[3.0, 1.0, 2.0]),
            Some(Summary {
                median: 2.0,
                min: 1.0,
                max: 3.0
            })
        );
        assert_eq!(Summary::of(&[4.0, 1.0]).map(|s| s.median), Some(2.5));
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[f64::NAN]), None);
    }
}
