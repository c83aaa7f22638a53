//! The budget's figures, as the manager reports them: the bytes of each
//! part of the budget ([`ResidencyUsage`]) and the host time spent in the
//! driver's calls ([`DriverTime`]).

use super::Residency;
use super::plan::StreamingPlan;
use super::timing::nanos;

/// The budget's figures now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResidencyUsage {
    /// The budget in bytes.
    pub budget: u64,
    /// Bytes of live pooled allocations.
    pub pool_used: u64,
    /// Bytes the pool holds from the device (at least `pool_used`).
    pub pool_reserved: u64,
    /// Managed bytes made resident by the manager.
    pub managed_resident: u64,
    /// Resident bytes of freed managed blocks kept for reuse or waiting for
    /// their free (counted against the budget, given back first).
    pub managed_kept: u64,
    /// Managed bytes allocated (resident or not).
    pub managed_allocated: u64,
    /// Bytes of resident streamed objects.
    pub streamed_resident: u64,
    /// Bytes of the streaming arena's chunks (part of `pool_used`; the
    /// resident streamed objects lie in them, or in pool slots of their
    /// own), and how many chunks there are.
    pub arena_bytes: u64,
    /// See `arena_bytes`.
    pub arena_chunks: u64,
    /// Arena chunks added and given back to the pool so far, and the bytes
    /// of the resident objects that giving chunks back evicted (a chunk is
    /// given back when the pool refuses a request the accounting had room
    /// for).
    pub arena_chunks_added: u64,
    /// See `arena_chunks_added`.
    pub arena_chunks_released: u64,
    /// See `arena_chunks_added`.
    pub arena_released_bytes: u64,
    /// Bytes of every streamed object, resident or not.
    pub streamed_allocated: u64,
    /// The most pool bytes held at once by everything but streamed
    /// objects (ciphertexts, temporaries, tables).
    pub others_peak: u64,
    /// Streamed objects fetched ahead of use by the look-ahead, and their
    /// bytes.
    pub prefetched: u64,
    /// Bytes of the fetches ahead of use.
    pub prefetched_bytes: u64,
    /// The streamed objects the last recorded phase keeps resident, in
    /// bytes, and its largest operation's streamed bytes.
    pub stable_bytes: u64,
    /// See `stable_bytes`.
    pub largest_step_bytes: u64,
    /// Bytes the last recording's split is simulated to fetch per run (the
    /// plan), and the floor: what Belady's demand schedule would fetch per
    /// run over all the room the budget leaves beside everything else's
    /// peak, with no stable set, no margin and nothing fetched early.
    pub planned_bytes: u64,
    /// See `planned_bytes`.
    pub floor_bytes: u64,
    /// How recordings are split into kept and streamed objects (the
    /// setting), and the plan the last recording was split with (`auto`
    /// resolved by its phase's items).
    pub streaming_plan: StreamingPlan,
    /// See `streaming_plan`.
    pub split_plan: Option<StreamingPlan>,
    /// Where the last recording's run was timed on the device: its split's
    /// run in the stall model (compute and stalls, nanoseconds per run;
    /// see `plan`'s `stalls`), the stalls alone, and the window split's
    /// run in the same model (the same split under `window`).
    pub planned_run_ns: Option<u64>,
    /// See `planned_run_ns`.
    pub planned_stall_ns: Option<u64>,
    /// See `planned_run_ns`.
    pub window_run_ns: Option<u64>,
    /// The copy rate the stall model assumed, bytes per second, and whether
    /// it was measured on the timed run (else a PCIe Gen5 constant).
    pub model_copy_rate: Option<u64>,
    /// See `model_copy_rate`.
    pub model_copy_rate_measured: Option<bool>,
    /// The last timed run that followed its plan (see
    /// [`Residency::set_time_every_run`]), as the device measured it: its
    /// steps' compute, and the compute stream's waits for fetches between
    /// them (the stalls the model predicts as `planned_stall_ns`), in
    /// nanoseconds.
    pub measured_compute_ns: Option<u64>,
    /// See `measured_compute_ns`.
    pub measured_wait_ns: Option<u64>,
    /// Phase runs that departed from their recording (their look-ahead
    /// stopped there), and the step at which the last one did: a run whose
    /// operations come in another order each time is never planned.
    pub departures: u64,
    /// See `departures`.
    pub last_departure: Option<usize>,
    /// Uses of streamed objects served in place from their pinned masters
    /// (zero-copy: no device room could be made for them), and the bytes
    /// of those objects.
    pub zero_copy_uses: u64,
    /// See `zero_copy_uses`.
    pub zero_copy_bytes: u64,
    /// Times the pool refused a request the accounting had room for (each
    /// makes the look-ahead leave more room).
    pub pool_refusals: u64,
    /// The room the look-ahead leaves free on the refusals' account.
    pub refusal_headroom: u64,
    /// Requests the pool placed after a trim, after a wait for the streams,
    /// and after evictions (see `pool_refusals`).
    pub refusals_resolved_after: [u64; 3],
    /// The most device-resident bytes seen after any decision.
    pub peak_device: u64,
}

impl ResidencyUsage {
    /// Device-resident bytes: the pool's footprint plus resident managed bytes.
    pub fn device_bytes(&self) -> u64 {
        super::state::device_bytes(
            self.pool_used,
            self.pool_reserved,
            self.managed_resident + self.managed_kept,
        )
    }
}

/// Host time spent in the residency driver's calls, by kind, since the
/// manager was made: where the time of a run under a budget goes on the host
/// side (a call that blocks, for instance, shows here and not in the bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverTime {
    /// Ordering the streams around a batch of actions (`begin`, `end`).
    pub order_ns: u64,
    /// Pool trims.
    pub trim_ns: u64,
    /// Setting read-mostly advice (a buffer coming back to the device).
    pub advise_on_ns: u64,
    /// Unsetting read-mostly advice (before an eviction).
    pub advise_off_ns: u64,
    /// Prefetches to the device.
    pub to_device_ns: u64,
    /// Prefetches to the host (evictions).
    pub to_host_ns: u64,
    /// Everything [`Residency::prepare`] does on the host: the look-ahead,
    /// the placement decisions and the driver calls above. A run under a
    /// budget whose operations each wait this long for their declaration
    /// can leave the device idle, host-bound, with no copy to wait for.
    pub prepare_ns: u64,
}

impl Residency {
    /// The accounting now.
    pub fn usage(&self) -> ResidencyUsage {
        let s = self.lock();
        let timing = s.streamed.choice.timing;
        ResidencyUsage {
            budget: s.budget,
            pool_used: s.pool_used,
            pool_reserved: s.pool_reserved,
            managed_resident: s.managed_resident,
            managed_kept: s.managed_kept,
            managed_allocated: s.managed_allocated,
            streamed_resident: s.streamed.resident,
            arena_bytes: s.streamed.arena.bytes(),
            arena_chunks: s.streamed.arena.len() as u64,
            arena_chunks_added: s.streamed.chunks_added,
            arena_chunks_released: s.streamed.chunks_released,
            arena_released_bytes: s.streamed.released_bytes,
            streamed_allocated: s.streamed.entries.values().map(|e| e.bytes).sum(),
            others_peak: s.streamed.others_peak,
            prefetched: s.streamed.prefetched,
            prefetched_bytes: s.streamed.prefetched_bytes,
            stable_bytes: s.streamed.choice.stable_bytes,
            largest_step_bytes: s.streamed.choice.largest_step_bytes,
            planned_bytes: s.streamed.choice.planned_bytes,
            floor_bytes: s.streamed.floor_bytes,
            streaming_plan: s.streaming_plan,
            split_plan: s.split_plan,
            planned_run_ns: timing.map(|t| t.run_ns),
            planned_stall_ns: timing.map(|t| t.stall_ns),
            window_run_ns: timing.map(|t| t.window_run_ns),
            model_copy_rate: timing.map(|t| t.copy_rate),
            model_copy_rate_measured: timing.map(|t| t.rate_measured),
            measured_compute_ns: s.streamed.measured.map(|m| nanos(m.compute)),
            measured_wait_ns: s.streamed.measured.map(|m| nanos(m.wait)),
            departures: s.planner.departures().0,
            last_departure: s.planner.departures().1,
            zero_copy_uses: s.streamed.zero_copy_uses,
            zero_copy_bytes: s.streamed.zero_copy_bytes,
            pool_refusals: s.streamed.refusals,
            refusal_headroom: s.streamed.refusal_headroom,
            refusals_resolved_after: s.streamed.resolved_after,
            peak_device: s.peak_device,
        }
    }

    /// Host time spent in the driver's calls so far, by kind.
    pub fn driver_time(&self) -> DriverTime {
        self.lock().driver_time
    }
}
