//! The stall model of a run, and the split chosen by it
//! ([`StreamingPlan::Stalls`](super::StreamingPlan::Stalls)).
//!
//! The window split ([`Recording::choose_stable`]) minimises the bytes a run
//! moves. What a run waits for is another thing: a copy is hidden when the
//! compute before its use is long enough, and a burst of uses of large
//! objects with little compute between them waits on PCIe whatever the
//! bytes elsewhere (FGb at 2 GiB on the H100: a CoeffToSlot key takes
//! ~1.6 ms to copy against ~0.5 ms of key switch, while SlotToCoeff and
//! EvalMod have slack). So the recording run is timed — each step's compute
//! on the device, and the copies' rate (`ResidencyDriver::take_run_times`) —
//! and [`Recording::simulate_stalls`] replays a steady-state run of a split
//! in time:
//!
//! * the fetches are those of [`Recording::simulate_window`], in its order:
//!   at each step the look-ahead's window (the step's own objects, then the
//!   others by next use while the room holds them), objects leaving only
//!   when the window overflows the room;
//! * one copy stream, serial: a fetch starts when the copy before it is done
//!   and when the room it fills is free — bytes given back by an object
//!   that left, after the last use of that object (the copy stream waits
//!   for it, as `Residency::evict_streamed` makes it), the earliest freed
//!   first;
//! * a step starts when the step before it has finished its compute and
//!   the fetches of its own objects are done; stable objects never wait.
//!
//! Its total is the second of two runs, from the end of the first run's
//! last step to the end of its own, and at least the copy stream's busy
//! time for the run's fetches (in the steady state a run cannot move its
//! bytes faster than the link; the simulation of two runs may put a few of
//! a run's copies in the tail of the one before or the head of the next).
//!
//! [`Recording::choose_stalls`] starts from the window split — the best in
//! time of the window's candidate rooms — and improves it greedily (never
//! past [`MAX_BYTES_OVER_WINDOW`] times the window split's bytes): the
//! streamed objects whose copies the run waited for most (a step's stall is
//! charged to the copies running while it waits, and what is left to its
//! own late objects) become stable, making room by streaming the stable
//! objects whose copies would hide best (the copy stream's idle time in the
//! look-ahead's stretch before each of their uses); the move that shortens
//! the simulated run most is taken, until none does. This is MemHC's
//! look-ahead over a known task order (§ 4.3), with the order's time as
//! well as its sequence known.

use fnv::{FnvHashMap as HashMap, FnvHashSet as HashSet};

use super::super::timing::nanos;
use super::{LOOK_AHEAD, Recording, StableChoice};
use crate::AllocationId;

/// The host→device rate of pinned copies assumed when the run's copies were
/// not timed, in bytes per second: PCIe Gen5 (DESIGN.md measures 55.5 GB/s
/// on the H200; about 50 on the H100).
pub(crate) const DEFAULT_COPY_RATE: f64 = 50e9;

/// Rounds of [`Recording::choose_stalls`]'s improvement, the streamed
/// objects tried for promotion in each, and the most runs it simulates in
/// all (a model of a few hundred steps takes about a millisecond: the
/// choice is made once per recording, on the host).
const ROUNDS: usize = 24;
const PROMOTIONS: usize = 4;
const EVALUATIONS: usize = 160;

/// The most bytes a run of the stall split may plan to move, in times what
/// the window split moves. The model trusts copies to hide more than they
/// do the more a split streams: on the H100 it predicted no stall for FGb
/// at 2 GiB with 1.2 GB a bootstrap (the run waited 3.6 ms for copies) and
/// with 1.8–2.1 GB (14 ms; 1.7× and 2.5× the window split's 0.85 GB;
/// docs/BENCHMARKS.md, "Eighth session"), and at 4 GiB for splits that
/// streamed 0.4–1.6 GB where none needed to (2–20 ms slower; "Sixth
/// session").
pub(crate) const MAX_BYTES_OVER_WINDOW: f64 = 2.0;

/// The device times of a recorded run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StepTimes {
    /// Each step's compute in seconds: from its start (after the waits for
    /// its fetches) to the next step's waits.
    pub(crate) compute: Vec<f64>,
    /// The copies' rate in bytes per second.
    pub(crate) rate: f64,
    /// Whether `rate` was measured on the run (else
    /// [`DEFAULT_COPY_RATE`]).
    pub(crate) rate_measured: bool,
}

/// A split's run in the stall model, in whole nanoseconds (so that the
/// figures compare exactly), beside the window split's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PlanTiming {
    /// The run: compute and stalls.
    pub(crate) run_ns: u64,
    /// The run's stalls: what it waits for copies beyond its compute.
    pub(crate) stall_ns: u64,
    /// The window split's run in the same model.
    pub(crate) window_run_ns: u64,
    /// The copy rate the model assumed, bytes per second.
    pub(crate) copy_rate: u64,
    /// Whether that rate was measured on the recorded run.
    pub(crate) rate_measured: bool,
}

/// A steady-state run of the stall model, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SimulatedRun {
    /// The run's length (see the module's documentation).
    pub(crate) total: f64,
    /// Its steps' compute.
    pub(crate) compute: f64,
    /// The copy stream's busy time for its fetches.
    pub(crate) copy: f64,
    /// Bytes it fetches.
    pub(crate) fetched: u64,
}

impl SimulatedRun {
    /// What the run waits beyond its compute.
    pub(crate) fn stall(&self) -> f64 {
        (self.total - self.compute).max(0.0)
    }
}

/// Where a simulated run's time went, for the improvement's choices.
#[derive(Debug, Default)]
struct Trace {
    /// Every fetch of both runs: object, copy start and end (copy stream
    /// order, so both times rise).
    fetches: Vec<(AllocationId, f64, f64)>,
    /// Each step's start, both runs.
    starts: Vec<f64>,
    /// The second run's stalls, charged to objects.
    stall: HashMap<AllocationId, f64>,
}

impl Trace {
    /// Copy-stream busy time within `[from, to]`.
    fn busy(&self, from: f64, to: f64) -> f64 {
        let first = self.fetches.partition_point(|f| f.2 <= from);
        self.fetches
            .iter()
            .skip(first)
            .take_while(|f| f.1 < to)
            .map(|f| (f.2.min(to) - f.1.max(from)).max(0.0))
            .sum()
    }
}

/// Takes `bytes` of free room, earliest freed first; returns when all of
/// them are free (when the room runs short, when all of it is).
fn take_room(free: &mut Vec<(f64, u64)>, bytes: u64) -> f64 {
    if bytes == 0 {
        return 0.0;
    }
    free.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut need, mut at) = (bytes, 0.0f64);
    while need > 0 {
        let Some(first) = free.first_mut() else {
            break;
        };
        at = at.max(first.0);
        if first.1 > need {
            first.1 -= need;
            need = 0;
        } else {
            need -= first.1;
            free.remove(0);
        }
    }
    at
}

impl Recording {
    /// A steady-state run of the split that keeps `stable` resident and
    /// streams the rest through `room` bytes, when step `k` computes for
    /// `compute[k]` seconds and copies move `rate` bytes per second (see
    /// the module's documentation): its length, compute, copy time and
    /// bytes. An infinite rate makes every copy free.
    pub(crate) fn simulate_stalls(
        &self,
        size: impl Fn(AllocationId) -> Option<u64>,
        stable: &HashSet<AllocationId>,
        room: u64,
        compute: &[f64],
        rate: f64,
    ) -> SimulatedRun {
        let times = StepTimes {
            compute: compute.to_vec(),
            rate,
            rate_measured: false,
        };
        self.model(&size, stable, room, &times, &self.window_orders())
            .0
    }

    /// The stall model's run of a split, and where its time went.
    fn model(
        &self,
        size: &impl Fn(AllocationId) -> Option<u64>,
        stable: &HashSet<AllocationId>,
        room: u64,
        times: &StepTimes,
        orders: &[Vec<(usize, AllocationId)>],
    ) -> (SimulatedRun, Trace) {
        let per_byte = if times.rate.is_finite() && times.rate > 0.0 {
            1.0 / times.rate
        } else {
            0.0
        };
        let mut resident: HashSet<AllocationId> = HashSet::default();
        let mut ready: HashMap<AllocationId, f64> = HashMap::default();
        let mut released: HashMap<AllocationId, f64> = HashMap::default();
        let mut free = vec![(0.0, room)];
        let (mut copy_free, mut end, mut run_start) = (0.0f64, 0.0f64, 0.0f64);
        let mut run = SimulatedRun::default();
        let mut trace = Trace::default();
        for pass in 0..2 {
            run_start = end;
            for (k, order) in orders.iter().enumerate() {
                let (window, left) = self.window_step(size, stable, room, order, &mut resident);
                for id in left {
                    let at = released.get(&id).copied().unwrap_or(0.0);
                    let at = at.max(ready.get(&id).copied().unwrap_or(0.0));
                    free.push((at, size(id).unwrap_or(0)));
                }
                for id in window {
                    if !resident.insert(id) {
                        continue;
                    }
                    let bytes = size(id).unwrap_or(0);
                    let start = copy_free.max(take_room(&mut free, bytes));
                    let done = start + bytes as f64 * per_byte;
                    copy_free = done;
                    ready.insert(id, done);
                    trace.fetches.push((id, start, done));
                    if pass == 1 {
                        run.fetched += bytes;
                        run.copy += done - start;
                    }
                }
                let step = self.steps.get(k).map_or(&[][..], Vec::as_slice);
                let waits = step
                    .iter()
                    .filter(|id| !stable.contains(id))
                    .filter_map(|id| ready.get(id).copied())
                    .fold(0.0f64, f64::max);
                let start = end.max(waits);
                trace.starts.push(start);
                let t = times.compute.get(k).copied().unwrap_or(0.0);
                if pass == 1 {
                    run.compute += t;
                    if start > end {
                        charge(&mut trace, step, &ready, (end, start), size);
                    }
                }
                end = start + t;
                for &id in step {
                    released.insert(id, end);
                }
            }
        }
        run.total = (end - run_start).max(run.copy);
        (run, trace)
    }

    /// The stall model's figures for the split this recording holds (its
    /// stable set in `capacity` bytes), where the run was timed.
    pub(crate) fn time_split(
        &self,
        size: impl Fn(AllocationId) -> Option<u64>,
        capacity: u64,
    ) -> Option<PlanTiming> {
        let times = self.times.as_ref()?;
        let used: u64 = self.stable.iter().filter_map(|&id| size(id)).sum();
        let room = capacity.saturating_sub(used);
        let run = self.simulate_stalls(&size, &self.stable, room, &times.compute, times.rate);
        Some(PlanTiming {
            run_ns: nanos(run.total),
            stall_ns: nanos(run.stall()),
            window_run_ns: nanos(run.total),
            copy_rate: times.rate.min(u64::MAX as f64) as u64,
            rate_measured: times.rate_measured,
        })
    }

    /// Chooses the stable set of
    /// [`StreamingPlan::Stalls`](super::StreamingPlan::Stalls) for
    /// `capacity` bytes of streamed objects: the window split (its
    /// candidate rooms weighed by time; `reserve` and `slack` as for
    /// [`Recording::choose_stable`]) improved greedily on the stall model
    /// (see the module's documentation), never planning to move more than
    /// `max_over_window` times the window split's bytes
    /// ([`MAX_BYTES_OVER_WINDOW`] in use). Without the run's times, the
    /// window split.
    pub(crate) fn choose_stalls(
        &mut self,
        size: impl Fn(AllocationId) -> Option<u64>,
        capacity: u64,
        reserve: f64,
        slack: f64,
        max_over_window: f64,
    ) -> StableChoice {
        let window = self.choose_stable(&size, capacity, reserve, slack);
        let Some(times) = self.times.clone() else {
            return window;
        };
        let orders = self.window_orders();
        let evaluate = |stable: &HashSet<AllocationId>, used: u64| {
            self.model(
                &size,
                stable,
                capacity.saturating_sub(used),
                &times,
                &orders,
            )
        };
        let window_stable = self.stable.clone();
        let window_run = evaluate(&window_stable, window.stable_bytes).0.total;
        let cap = (window.planned_bytes as f64 * max_over_window).min(u64::MAX as f64) as u64;
        // The start: the fastest of the window's candidate rooms, the
        // window's own choice on ties.
        let (mut best, mut best_used, mut best_run) =
            (window_stable, window.stable_bytes, window_run);
        // Never less streaming room than the window split leaves: a room
        // of a few steps, enough in the model, left a budget of 2 GiB no
        // space for FVb's temporaries beside a larger stable set
        // (`OverBudget` on the H100, where the window split completes).
        for (_, stable, used) in self.window_candidates(&size, capacity, reserve) {
            if used > window.stable_bytes {
                continue;
            }
            let run = evaluate(&stable, used).0;
            if run.fetched > cap {
                continue;
            }
            let run = run.total;
            if run < best_run {
                (best, best_used, best_run) = (stable, used, run);
            }
        }
        let largest = self.largest_step_bytes(&size);
        let min_room = capacity.saturating_sub(window.stable_bytes);
        let mut evaluations = 0;
        for _ in 0..ROUNDS {
            let (_, trace) = evaluate(&best, best_used);
            let mut next: Option<(f64, HashSet<AllocationId>, u64)> = None;
            for (stable, used) in self.moves(&size, &best, best_used, capacity, min_room, &trace) {
                evaluations += 1;
                let run = evaluate(&stable, used).0;
                if run.fetched > cap {
                    continue;
                }
                let run = run.total;
                if run < next.as_ref().map_or(best_run, |n| n.0) {
                    next = Some((run, stable, used));
                }
            }
            // A gain below a millionth of the run is noise of the model.
            let Some((run, stable, used)) = next.filter(|n| n.0 < best_run * (1.0 - 1e-6)) else {
                break;
            };
            (best, best_used, best_run) = (stable, used, run);
            if evaluations >= EVALUATIONS {
                break;
            }
        }
        let room = capacity.saturating_sub(best_used);
        let planned = self.simulate_window(&size, &best, room);
        let stall = evaluate(&best, best_used).0.stall();
        self.stable = best;
        StableChoice {
            stable_bytes: best_used,
            largest_step_bytes: largest,
            planned_bytes: planned,
            timing: Some(PlanTiming {
                run_ns: nanos(best_run),
                stall_ns: nanos(stall),
                window_run_ns: nanos(window_run),
                copy_rate: times.rate.min(u64::MAX as f64) as u64,
                rate_measured: times.rate_measured,
            }),
        }
    }

    /// The splits one move away from `stable` (its bytes `used`): for each
    /// of the streamed objects the run waited for most, that object made
    /// stable, with the stable objects whose copies would hide best
    /// streamed until the room is at least `min_room` — or, in a second
    /// variant, until it is at least what it was; and the stable object
    /// whose copies would hide best streamed alone.
    fn moves(
        &self,
        size: &impl Fn(AllocationId) -> Option<u64>,
        stable: &HashSet<AllocationId>,
        used: u64,
        capacity: u64,
        min_room: u64,
        trace: &Trace,
    ) -> Vec<(HashSet<AllocationId>, u64)> {
        let mut waited: Vec<(f64, AllocationId)> = trace
            .stall
            .iter()
            .filter(|(id, s)| **s > 0.0 && !stable.contains(id))
            .map(|(&id, &s)| (s, id))
            .collect();
        waited.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut hiding: Vec<(f64, u64, AllocationId)> = stable
            .iter()
            .filter_map(|&id| Some((self.hidden_cost(id, size(id)?, trace), size(id)?, id)))
            .collect();
        hiding.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let room = capacity.saturating_sub(used);
        let mut moves = Vec::new();
        for &(_, promoted) in waited.iter().take(PROMOTIONS) {
            let Some(bytes) = size(promoted) else {
                continue;
            };
            for keep_room in [min_room, room.max(min_room)] {
                let mut next = stable.clone();
                next.insert(promoted);
                let mut next_used = used + bytes;
                for &(_, b, id) in &hiding {
                    if capacity.saturating_sub(next_used) >= keep_room {
                        break;
                    }
                    next.remove(&id);
                    next_used -= b;
                }
                if capacity.saturating_sub(next_used) >= keep_room
                    && !moves.iter().any(|(m, _)| *m == next)
                {
                    moves.push((next, next_used));
                }
            }
        }
        if let Some(&(_, b, id)) = hiding.first() {
            let mut next = stable.clone();
            next.remove(&id);
            moves.push((next, used - b));
        }
        moves
    }

    /// What streaming `id` (of `bytes`) would stall, by the run `trace`
    /// shows: at each use that would fetch it again (more than
    /// [`LOOK_AHEAD`] steps after the one before), its copy time less the
    /// copy stream's idle time over the look-ahead's stretch before.
    fn hidden_cost(&self, id: AllocationId, bytes: u64, trace: &Trace) -> f64 {
        let (Some(positions), Some(times)) = (self.positions.get(&id), &self.times) else {
            return 0.0;
        };
        let len = self.steps.len();
        let copy = if times.rate.is_finite() && times.rate > 0.0 {
            bytes as f64 / times.rate
        } else {
            0.0
        };
        let span = LOOK_AHEAD.min(len);
        let mut previous = positions.last().map(|&p| p as isize - len as isize);
        let mut cost = 0.0;
        for &p in positions {
            let gap = previous.map_or(len, |q| (p as isize - q) as usize);
            previous = Some(p as isize);
            if gap <= LOOK_AHEAD {
                continue;
            }
            let (Some(&to), Some(&from)) =
                (trace.starts.get(len + p), trace.starts.get(len + p - span))
            else {
                continue;
            };
            let idle = (to - from) - trace.busy(from, to);
            cost += (copy - idle).max(0.0);
        }
        cost
    }
}

/// Charges a stall of the second run, `(from, to]`, to the copies running
/// while the step waited (by their overlap with it) and what is left to the
/// step's own objects that arrived late (by bytes).
fn charge(
    trace: &mut Trace,
    step: &[AllocationId],
    ready: &HashMap<AllocationId, f64>,
    (from, to): (f64, f64),
    size: &impl Fn(AllocationId) -> Option<u64>,
) {
    let mut charged = 0.0;
    let first = trace.fetches.partition_point(|f| f.2 <= from);
    let overlaps: Vec<(AllocationId, f64)> = trace
        .fetches
        .iter()
        .skip(first)
        .take_while(|f| f.1 < to)
        .map(|f| (f.0, (f.2.min(to) - f.1.max(from)).max(0.0)))
        .collect();
    for (id, overlap) in overlaps {
        *trace.stall.entry(id).or_insert(0.0) += overlap;
        charged += overlap;
    }
    let left = (to - from) - charged;
    let late: Vec<(AllocationId, u64)> = step
        .iter()
        .filter(|id| ready.get(id).is_some_and(|&r| r > from))
        .filter_map(|&id| Some((id, size(id)?)))
        .collect();
    let late_bytes: u64 = late.iter().map(|l| l.1).sum();
    if left > 0.0 && late_bytes > 0 {
        for (id, bytes) in late {
            *trace.stall.entry(id).or_insert(0.0) += left * bytes as f64 / late_bytes as f64;
        }
    }
}

#[cfg(test)]
pub(super) mod tests;
