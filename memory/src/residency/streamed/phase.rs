//! Phases of work and the streaming settings: a phase's recording gets its
//! split into kept and streamed objects when the phase ends, in the room
//! the budget leaves streamed objects.

use super::super::Residency;
use super::super::RunTimes;
use super::super::plan::{
    DEFAULT_COPY_RATE, MAX_BYTES_OVER_WINDOW, RunEnd, StepTimes, StreamingPlan,
};
use super::super::state::State;
use super::{StreamedEntry, ZeroCopy};

impl Residency {
    /// Starts a phase of work named `key` (see [`plan`](crate::residency::plan))
    /// that runs `items` items stage by stage (1 for one bootstrap, the
    /// batch's size for a batch: [`StreamingPlan::Auto`] splits by it).
    /// Its first run, the one recorded, is timed on the device (each step's
    /// compute and the copies' rate) for the stall model.
    pub fn begin_phase(&self, key: u64, items: usize) {
        let mut s = self.lock();
        s.planner.begin(key);
        s.phase_items = items;
        s.phase_others_peak = s.streamed.others_peak;
        self.driver.time_run(s.planner.timing());
    }

    /// Ends the phase begun last as if its run had not happened: a run
    /// its caller gave up (a batch the budget refused, to be run again
    /// smaller) neither becomes the phase's recording nor replaces it, is
    /// not timed, and the peak of everything but streamed objects it
    /// reached is forgotten — the streaming room of the runs after it is
    /// planned from their own peak. (Kept, a refused FVb batch of two at
    /// 2 GiB left its successors 10 ms a bootstrap slower on the H100:
    /// docs/BENCHMARKS.md, fifteenth session.)
    pub fn abandon_phase(&self) {
        let mut s = self.lock();
        s.planner.abandon();
        s.streamed.others_peak = s.phase_others_peak;
        self.driver.time_run(false);
    }

    /// Ends the phase begun last. A new recording gets its stable set for
    /// the room the budget leaves streamed objects (the budget less the
    /// peak of everything else and a margin), chosen with its run's device
    /// times where it was timed (reading them waits for the run's work); a
    /// timed run that followed its plan (see [`Residency::set_time_every_run`])
    /// leaves its measured compute and waits in [`Residency::usage`].
    pub fn end_phase(&self) {
        let mut s = self.lock();
        let times = if s.planner.timing() {
            // A failed mark leaves the run untimed (the window split).
            self.driver.step_ended().ok();
            self.driver.take_run_times()
        } else {
            None
        };
        let capacity = Self::streamed_capacity(&s);
        let room = s.budget.saturating_sub(s.streamed.others_peak);
        let reserve = s.streaming_reserve;
        let slack = s.streaming_slack;
        let plan = s.streaming_plan.for_items(s.phase_items);
        let State {
            planner, streamed, ..
        } = &mut *s;
        let recording = match planner.end() {
            RunEnd::Nothing => return,
            RunEnd::Followed => {
                if let Some(times) = &times {
                    streamed.measured = Some(MeasuredRun::of(times));
                }
                return;
            }
            RunEnd::Recorded(recording) => recording,
        };
        if let Some(times) = times {
            recording.set_times(StepTimes {
                compute: times.steps,
                rate: times.copy_rate.unwrap_or(DEFAULT_COPY_RATE),
                rate_measured: times.copy_rate.is_some(),
            });
        }
        let entries = &streamed.entries;
        let size = |id| entries.get(&id).map(|e: &StreamedEntry| e.bytes);
        streamed.choice = match plan {
            StreamingPlan::Window => {
                let mut choice = recording.choose_stable(size, capacity, reserve, slack);
                choice.timing = recording.time_split(size, capacity);
                choice
            }
            StreamingPlan::Belady => recording.choose_belady(size, capacity, reserve),
            StreamingPlan::Stalls | StreamingPlan::Auto => {
                recording.choose_stalls(size, capacity, reserve, slack, MAX_BYTES_OVER_WINDOW)
            }
        };
        streamed.floor_bytes = recording.floor_bytes(size, room);
        s.split_plan = Some(plan);
    }

    /// Times every run of a phase on the device, not only those that
    /// record it (see [`ResidencyUsage::measured_wait_ns`]; each
    /// step then records two timing events).
    ///
    /// [`ResidencyUsage::measured_wait_ns`]: crate::residency::ResidencyUsage::measured_wait_ns
    pub fn set_time_every_run(&self, on: bool) {
        self.lock().planner.set_time_every_run(on);
    }

    /// Sets how many of the largest step's bytes the stable set leaves for
    /// streaming (see [`plan`](crate::residency::plan); default 2: one step in use, the next
    /// arriving).
    pub fn set_streaming_reserve(&self, steps: f64) {
        self.lock().streaming_reserve = steps;
    }

    /// How many more bytes than the fewest the window split may plan to
    /// move for more streaming room (see `Recording::choose_stable`;
    /// default 0).
    pub fn set_streaming_slack(&self, slack: f64) {
        self.lock().streaming_slack = slack.max(0.0);
    }

    /// How a new recording is split into what stays and what streams (see
    /// [`StreamingPlan`]).
    pub fn set_streaming_plan(&self, plan: StreamingPlan) {
        self.lock().streaming_plan = plan;
    }

    /// When kernels may read streamed objects in place (see [`ZeroCopy`]).
    pub fn set_zero_copy(&self, mode: ZeroCopy) {
        self.lock().zero_copy = mode;
    }

    /// Whether streamed objects share the chunks of an arena of their own
    /// (the default; see `arena`) or take a pool slot each, beside the
    /// temporaries (for comparison).
    pub fn set_streaming_arena(&self, on: bool) {
        self.lock().streaming_arena = on;
    }

    /// Sets the margin the look-ahead leaves free: 1/`divisor` of the
    /// budget (default 32).
    pub fn set_streaming_margin(&self, divisor: u64) {
        self.lock().streaming_margin = divisor.max(1);
    }

    /// Pool bytes the look-ahead may fill with streamed objects: the budget
    /// less the peak of everything else, a margin (1/`streaming_margin` of
    /// the budget) for the pool's fragmentation, and what refusals of the
    /// pool have shown it needs more. (Measured on the H100, FGb at 2 GiB,
    /// with the objects in pool slots beside the temporaries: with 1/32 the
    /// pool refused 456 requests in seven bootstraps and the waits made them
    /// 76–136 ms; with 1/16, 340 refusals and 65–69 ms, although 1.6 GB
    /// streamed per bootstrap instead of 1.0–1.2 GB. The arena keeps the
    /// objects out of the temporaries' way; see `arena`.)
    pub(in crate::residency) fn streamed_capacity(s: &State) -> u64 {
        let margin = s.budget / s.streaming_margin.max(1);
        let headroom = s.streamed.others_peak + margin + s.streamed.refusal_headroom;
        s.budget.saturating_sub(headroom)
    }
}

/// What the device measured over a timed run that followed its plan: its
/// steps' compute and their waits for fetches, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(in crate::residency) struct MeasuredRun {
    pub(in crate::residency) compute: f64,
    pub(in crate::residency) wait: f64,
}

impl MeasuredRun {
    fn of(times: &RunTimes) -> Self {
        Self {
            compute: times.compute(),
            wait: times.wait(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::plan::{DEFAULT_COPY_RATE, StreamingPlan, burst_case};
    use super::super::super::timing::nanos;
    use super::super::testing::{MIB, fetched, id, manager, manager_with_arena, object};
    use crate::{MemoryClass, Placement};

    /// Bytes fetched over `runs` runs of a cyclic phase whose steps touch the
    /// objects `steps` (1 MiB each) under `budget`.
    fn cyclic(budget: u64, objects: u64, steps: &[u64], runs: usize) -> (u64, Vec<u64>) {
        let (r, d, stats) = manager(budget);
        for n in 1..=objects {
            object(&r, n, MIB);
        }
        let mut last = Vec::new();
        for run in 0..runs {
            r.begin_phase(42, 1);
            for &n in steps {
                drop(r.prepare(&[id(n)]).expect("fits"));
            }
            r.end_phase();
            let calls = d.take();
            if run + 1 == runs {
                last = fetched(&calls);
            }
        }
        let s = stats.snapshot();
        let moved = s
            .get(MemoryClass::EvaluationKey, Placement::Streamed)
            .prefetched_to_device;
        (moved, last)
    }

    #[test]
    fn following_the_recording_moves_close_to_what_belady_moves() {
        // Forty objects in a cycle; the budget leaves room for 30 (a 1/16
        // margin). Belady's demand schedule fetches n(n−k)/(n−1) = 10.3 a
        // run on average.
        let steps: Vec<u64> = (1..=40).collect();
        let budget = 32 * MIB;
        let (_, first) = cyclic(budget, 40, &steps, 1);
        assert_eq!(first.len(), 40, "the first run misses everything");
        let (moved, last) = cyclic(budget, 40, &steps, 5);
        let belady = 10;
        assert!(
            (belady..=belady * 6 / 5).contains(&last.len()),
            "steady state fetched {} objects a run: {last:?}",
            last.len()
        );
        // Least recently used would fetch all 40 every run: 200 MiB.
        assert!(moved < 100 * MIB, "{moved}");
    }

    #[test]
    fn a_timed_recording_gets_the_stall_split_and_the_runs_follow_it() {
        // The burst after slack of the stall model's tests, with the mock
        // giving the recorded run its steps' times and the copy rate.
        let (steps, compute, sizes) = burst_case(4, 40);
        // Room for the streamed objects: 481 MB (the budget less 1/32).
        let budget = 496_516_129;
        // Objects in pool slots of their own (the mock's pool never
        // fragments: the runs move their plan within 2 %), and in the
        // arena (whose holes cost a little more: 10 %, as the arena's
        // tests allow).
        for (arena, tolerance) in [(false, 50), (true, 10)] {
            let (window, stalls) = timed_runs(&steps, &compute, &sizes, budget, arena, tolerance);
            // Only the first run was timed, with one time per step: both
            // plans have the model's figures, the window's the same in both.
            assert_eq!(window.planned_run_ns, window.window_run_ns);
            assert_eq!(stalls.window_run_ns, window.planned_run_ns);
            assert_eq!(stalls.model_copy_rate, Some(DEFAULT_COPY_RATE as u64));
            assert_eq!(stalls.model_copy_rate_measured, Some(true));
            let (w, s) = (
                window.planned_run_ns.expect("timed"),
                stalls.planned_run_ns.expect("timed"),
            );
            assert!(s < w, "stalls {s} ns against window {w} ns");
            assert!(
                stalls.planned_stall_ns < window.planned_stall_ns,
                "{stalls:?}"
            );
            assert!(stalls.planned_bytes > window.planned_bytes, "{stalls:?}");
        }
    }

    /// Runs the phase `steps` once on `r`, the mock timing each step with
    /// `compute` and each wait with `waits` where the run is timed, and
    /// returns the usage after it.
    fn timed_run(
        r: &std::sync::Arc<crate::residency::Residency>,
        d: &crate::residency::driver::mock::RecordingDriver,
        steps: &[Vec<crate::AllocationId>],
        compute: &[f64],
        waits: &[f64],
    ) -> crate::residency::ResidencyUsage {
        *d.step_durations.lock().expect("durations") = compute.to_vec();
        *d.step_waits.lock().expect("waits") = waits.to_vec();
        *d.copy_rate.lock().expect("rate") = Some(DEFAULT_COPY_RATE);
        r.begin_phase(5, 1);
        for step in steps {
            drop(r.prepare(step).expect("fits"));
        }
        r.end_phase();
        r.usage()
    }

    #[test]
    fn untimed_runs_keep_the_recorded_split() {
        let (steps, compute, sizes) = burst_case(4, 40);
        let (r, d, _) = manager_with_arena(496_516_129, true);
        for &(n, bytes) in &sizes {
            object(&r, n, bytes);
        }
        let recorded = timed_run(&r, &d, &steps, &compute, &[]);
        for _ in 0..4 {
            let usage = timed_run(&r, &d, &steps, &compute, &[1e-3]);
            assert_eq!(usage.planned_bytes, recorded.planned_bytes);
            assert_eq!(usage.measured_wait_ns, None);
        }
    }

    /// A run given up (`abandon_phase`) leaves the recording, the
    /// departures and the peak of the temporaries as the runs before it
    /// left them; the next run follows the recording.
    #[test]
    fn an_abandoned_run_is_not_recorded_and_its_peak_is_forgotten() {
        let (r, d, _) = manager(64 * MIB);
        for n in 1..=3 {
            object(&r, n, MIB);
        }
        let temporaries =
            |r: &std::sync::Arc<crate::residency::Residency>, bytes: u64, steps: &[u64]| {
                r.reserve_pool(MemoryClass::Temporary, bytes).expect("fits");
                for &n in steps {
                    drop(r.prepare(&[id(n)]).expect("fits"));
                }
                r.release_pool(MemoryClass::Temporary, bytes);
            };
        r.begin_phase(7, 1);
        temporaries(&r, 4 * MIB, &[1, 2, 3]);
        r.end_phase();
        assert_eq!(r.usage().others_peak, 4 * MIB);
        let recorded = |r: &std::sync::Arc<crate::residency::Residency>| {
            r.lock().planner.last_recording().map(|rec| rec.steps.len())
        };
        assert_eq!(recorded(&r), Some(3));
        d.take();

        // Eight times the temporaries, the first step, then given up.
        r.begin_phase(7, 1);
        temporaries(&r, 32 * MIB, &[1]);
        assert_eq!(r.usage().others_peak, 32 * MIB);
        r.abandon_phase();
        assert_eq!(r.usage().others_peak, 4 * MIB);
        assert_eq!(recorded(&r), Some(3));
        assert_eq!(r.lock().planner.departures().0, 0);

        // The next run follows the three-step recording to its end.
        r.begin_phase(7, 1);
        temporaries(&r, 4 * MIB, &[1, 2, 3]);
        assert!(r.lock().planner.look_ahead().is_some(), "following");
        r.end_phase();
        assert_eq!(r.lock().planner.departures().0, 0);
        assert_eq!(r.usage().others_peak, 4 * MIB);
    }

    #[test]
    fn timing_every_run_measures_the_last_followed_run() {
        let (steps, compute, sizes) = burst_case(4, 40);
        let (r, d, _) = manager_with_arena(496_516_129, true);
        r.set_time_every_run(true);
        for &(n, bytes) in &sizes {
            object(&r, n, bytes);
        }
        // The recorded run is not one that followed a plan.
        let first = timed_run(&r, &d, &steps, &compute, &[2e-4]);
        assert_eq!(first.measured_wait_ns, None);
        for wait in [3e-4, 5e-5] {
            let usage = timed_run(&r, &d, &steps, &compute, &[wait, 0.0]);
            let waited = wait * steps.len().div_ceil(2) as f64;
            assert_eq!(usage.measured_wait_ns, Some(nanos(waited)));
            assert_eq!(usage.measured_compute_ns, Some(nanos(compute.iter().sum())));
            // Timing alone never changes the split.
            assert_eq!(usage.planned_run_ns, first.planned_run_ns);
            assert_eq!(usage.stable_bytes, first.stable_bytes);
        }
    }

    /// `auto` splits a phase of one item as `stalls` does and a phase of
    /// several as `belady` does: the same stable bytes, the same planned
    /// fetches, the same calls to the driver in every run, and the usage
    /// names the plan it resolved to.
    #[test]
    fn auto_splits_one_item_by_stalls_and_a_batch_by_belady() {
        // A batch of three over twelve keys: each key serves the three
        // items in a row, some keys twice a run, with uneven sizes.
        let sizes: Vec<(u64, u64)> = (1..=12).map(|n| (n, (1 + n % 4) * MIB)).collect();
        let order = [1, 2, 3, 4, 5, 6, 2, 7, 8, 9, 10, 4, 11, 12, 1];
        let batch: Vec<u64> = order.iter().flat_map(|&n| [n, n, n]).collect();
        let compute: Vec<f64> = (0..batch.len())
            .map(|i| 1e-4 * (1 + i % 3) as f64)
            .collect();
        let run = |plan: StreamingPlan, items: usize, steps: &[u64]| {
            let (r, d, _) = manager_with_arena(16 * MIB, true);
            r.set_streaming_plan(plan);
            *d.step_durations.lock().expect("durations") = compute.clone();
            *d.copy_rate.lock().expect("rate") = Some(DEFAULT_COPY_RATE);
            for &(n, bytes) in &sizes {
                object(&r, n, bytes);
            }
            let mut calls = Vec::new();
            for _ in 0..3 {
                r.begin_phase(9, items);
                for &n in steps {
                    drop(r.prepare(&[id(n)]).expect("fits"));
                }
                r.end_phase();
                calls.push(d.take());
            }
            (r.usage(), calls)
        };
        for (items, steps, resolved) in [
            (1, &order[..], StreamingPlan::Stalls),
            (3, &batch[..], StreamingPlan::Belady),
        ] {
            let (auto, auto_calls) = run(StreamingPlan::Auto, items, steps);
            let (fixed, fixed_calls) = run(resolved, items, steps);
            assert_eq!(auto.streaming_plan, StreamingPlan::Auto);
            assert_eq!(auto.split_plan, Some(resolved), "{items} items");
            assert_eq!(fixed.split_plan, Some(resolved));
            assert_eq!(
                (auto.stable_bytes, auto.planned_bytes, auto.floor_bytes),
                (fixed.stable_bytes, fixed.planned_bytes, fixed.floor_bytes),
                "{items} items"
            );
            assert_eq!(auto_calls, fixed_calls, "{items} items");
            assert!(auto.planned_bytes > 0, "the room makes keys stream");
            // The other plan splits this phase otherwise: the resolution
            // is what the comparison checks.
            let other = match resolved {
                StreamingPlan::Belady => StreamingPlan::Stalls,
                _ => StreamingPlan::Belady,
            };
            let (_, other_calls) = run(other, items, steps);
            assert_ne!(other_calls, fixed_calls, "{items} items");
        }
        // An explicit plan is kept whatever the items.
        for plan in [
            StreamingPlan::Window,
            StreamingPlan::Belady,
            StreamingPlan::Stalls,
        ] {
            assert_eq!(plan.for_items(8), plan);
            assert_eq!(plan.for_items(1), plan);
        }
    }

    /// Four runs of the phase `steps` over objects of `sizes` under
    /// `budget`, under the window plan and the stall plan, the first run
    /// timed by the mock (`compute`, and the default copy rate as if
    /// measured): checks that from the third run on the objects each split
    /// keeps are never fetched and the bytes moved are the planned ones
    /// within 1/`tolerance`; returns the two plans' figures.
    fn timed_runs(
        steps: &[Vec<crate::AllocationId>],
        compute: &[f64],
        sizes: &[(u64, u64)],
        budget: u64,
        arena: bool,
        tolerance: u64,
    ) -> (
        crate::residency::ResidencyUsage,
        crate::residency::ResidencyUsage,
    ) {
        let mut usages = Vec::new();
        for plan in [StreamingPlan::Window, StreamingPlan::Stalls] {
            let (r, d, _) = manager_with_arena(budget, arena);
            r.set_streaming_plan(plan);
            *d.step_durations.lock().expect("durations") = compute.to_vec();
            *d.copy_rate.lock().expect("rate") = Some(DEFAULT_COPY_RATE);
            for &(n, bytes) in sizes {
                object(&r, n, bytes);
            }
            for run in 0..4 {
                r.begin_phase(5, 1);
                // What the split keeps, as the look-ahead reads it.
                let stable: Vec<u64> = sizes
                    .iter()
                    .map(|&(n, _)| n)
                    .filter(|&n| r.lock().planner.is_stable(id(n)))
                    .collect();
                for step in steps {
                    drop(r.prepare(step).expect("fits"));
                }
                r.end_phase();
                let calls = d.take();
                if run < 2 {
                    continue;
                }
                // The objects the split keeps stay; the others move what
                // the split was simulated to move.
                let usage = r.usage();
                let kept: u64 = sizes
                    .iter()
                    .filter(|(n, _)| stable.contains(n))
                    .map(|s| s.1)
                    .sum();
                assert_eq!(kept, usage.stable_bytes, "{plan:?}: {stable:?}");
                let moved = fetched(&calls);
                assert!(
                    moved.iter().all(|n| !stable.contains(n)),
                    "{plan:?}: {moved:?} against {stable:?}"
                );
                let bytes: u64 = moved
                    .iter()
                    .map(|n| sizes.iter().find(|s| s.0 == *n).map_or(0, |s| s.1))
                    .sum();
                assert!(
                    bytes.abs_diff(usage.planned_bytes) <= usage.planned_bytes / tolerance,
                    "{plan:?}, arena {arena}: moved {bytes}, planned {}",
                    usage.planned_bytes
                );
            }
            usages.push(r.usage());
        }
        (usages[0], usages[1])
    }
}
