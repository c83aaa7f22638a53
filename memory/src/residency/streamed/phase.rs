//! Phases of work and the streaming settings: a phase's recording gets its
//! split into kept and streamed objects when the phase ends, in the room
//! the budget leaves streamed objects.

use super::super::Residency;
use super::super::plan::StreamingPlan;
use super::super::state::State;
use super::{StreamedEntry, ZeroCopy};

impl Residency {
    /// Starts a phase of work named `key` (see [`plan`](crate::residency::plan)).
    pub fn begin_phase(&self, key: u64) {
        self.lock().planner.begin(key);
    }

    /// Ends the phase begun last. A new recording gets its stable set for
    /// the room the budget leaves streamed objects (the budget less the
    /// peak of everything else and a margin).
    pub fn end_phase(&self) {
        let mut s = self.lock();
        let capacity = Self::streamed_capacity(&s);
        let room = s.budget.saturating_sub(s.streamed.others_peak);
        let reserve = s.streaming_reserve;
        let slack = s.streaming_slack;
        let plan = s.streaming_plan;
        let State {
            planner, streamed, ..
        } = &mut *s;
        if let Some(recording) = planner.end() {
            let entries = &streamed.entries;
            let size = |id| entries.get(&id).map(|e: &StreamedEntry| e.bytes);
            streamed.choice = match plan {
                StreamingPlan::Window => recording.choose_stable(size, capacity, reserve, slack),
                StreamingPlan::Belady => recording.choose_belady(size, capacity, reserve),
            };
            streamed.floor_bytes = recording.floor_bytes(size, room);
        }
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

#[cfg(test)]
mod tests {
    use super::super::testing::{MIB, fetched, id, manager, object};
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
            r.begin_phase(42);
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
}
