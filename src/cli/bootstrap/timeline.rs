//! `hemem bootstrap --cupti --gpu-timeline`: each bootstrap's device time
//! between its first and last kernel, split into kernels, waits while a
//! host→device copy was in flight (fetches) and other idle time (the device
//! waiting for the host), from CUPTI's kernel and copy records
//! ([`hemem_memory::cuda::timeline`]), and the host's time in each driver
//! call meanwhile.

use hemem_memory::cuda::cupti::driver_call_name;
use hemem_memory::cuda::timeline::TimelineSummary;
use serde::Serialize;

/// One bootstrap's device timeline, in milliseconds.
#[derive(Debug, Serialize)]
pub(super) struct Idle {
    /// First kernel start to last kernel end.
    span_ms: f64,
    /// Time a kernel ran.
    busy_ms: f64,
    /// Time no kernel ran while a host→device copy was in flight.
    idle_copying_ms: f64,
    /// Time no kernel ran and no copy either.
    idle_other_ms: f64,
    /// Kernels recorded.
    kernels: u64,
    /// The longest idle stretches.
    longest_idle: Vec<IdleGap>,
    /// The host's time in the driver during the bootstrap, by call: `[name,
    /// calls, ms]`, most time first.
    host_calls: Vec<(String, u64, f64)>,
}

/// An idle stretch between two kernels.
#[derive(Debug, Serialize)]
pub(super) struct IdleGap {
    ms: f64,
    /// How much of it a host→device copy was in flight.
    copying_ms: f64,
    /// The kernels on either side.
    before: Option<String>,
    after: Option<String>,
    /// Kernels of the bootstrap before it.
    kernels_before: usize,
    /// The host's driver calls that overlap it most: `[name, ms]`.
    calls: Vec<(String, f64)>,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl Idle {
    pub(super) fn of(s: &TimelineSummary) -> Self {
        Self {
            span_ms: ms(s.span_ns),
            busy_ms: ms(s.busy_ns),
            idle_copying_ms: ms(s.idle_copying_ns),
            idle_other_ms: ms(s.idle_ns - s.idle_copying_ns),
            kernels: s.kernels,
            longest_idle: s
                .longest
                .iter()
                .map(|g| IdleGap {
                    ms: ms(g.ns),
                    copying_ms: ms(g.copying_ns),
                    before: g.before.clone(),
                    after: g.after.clone(),
                    kernels_before: g.kernels_before,
                    calls: g
                        .calls
                        .iter()
                        .map(|&(cbid, ns)| (call_name(cbid), ms(ns)))
                        .collect(),
                })
                .collect(),
            host_calls: s
                .host_calls
                .iter()
                .map(|c| (call_name(c.cbid), c.count, ms(c.ns)))
                .collect(),
        }
    }
}

fn call_name(cbid: u32) -> String {
    driver_call_name(cbid).unwrap_or_else(|| format!("#{cbid}"))
}
