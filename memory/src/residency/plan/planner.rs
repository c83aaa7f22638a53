//! Following a phase: the planner records each run's steps, and while a
//! run matches its recording answers when each object is needed next.

use fnv::FnvHashMap as HashMap;

use super::Recording;
use crate::AllocationId;

/// The phase being run.
#[derive(Debug, Clone)]
struct Active {
    key: u64,
    steps: Vec<Vec<AllocationId>>,
    /// Whether every step so far matched the recording.
    following: bool,
    /// Whether the run is timed: its phase had no recording when it began
    /// (the run is the one recorded; see `stalls`), or every run is timed.
    timed: bool,
}

/// How a phase's run ended (see [`Planner::end`]).
#[derive(Debug)]
pub(crate) enum RunEnd<'a> {
    /// No phase was running, or it ran no step.
    Nothing,
    /// The run followed its recording to its end.
    Followed,
    /// The run became its phase's recording (the phase's first, or one that
    /// departed from the recording): the caller chooses its split.
    Recorded(&'a mut Recording),
}

/// The recording a run follows, at the step after the last one run (see
/// [`Planner::look_ahead`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LookAhead<'a> {
    recording: &'a Recording,
    now: usize,
}

impl LookAhead<'_> {
    /// As [`Planner::next_use`].
    pub(crate) fn next_use(&self, id: AllocationId) -> Option<usize> {
        self.recording.next_use(id, self.now)
    }

    /// As [`Planner::is_stable`].
    pub(crate) fn keeps(&self, id: AllocationId) -> bool {
        self.recording.keeps(id, self.now)
    }
}

/// Recordings by phase key, and the phase now running.
#[derive(Debug, Default)]
pub(crate) struct Planner {
    recordings: HashMap<u64, Recording>,
    active: Option<Active>,
    /// Runs that departed from their recording, and the step at which the
    /// last one did.
    departures: u64,
    last_departure: Option<usize>,
    /// Whether every run is timed, not only those that record.
    time_every_run: bool,
    /// The phase recorded last.
    last_recorded: Option<u64>,
}

impl Planner {
    /// Starts phase `key` (ending any phase left open).
    pub(crate) fn begin(&mut self, key: u64) {
        self.end();
        let recorded = self.recordings.contains_key(&key);
        self.active = Some(Active {
            key,
            steps: Vec::new(),
            following: recorded,
            timed: !recorded || self.time_every_run,
        });
    }

    /// Times every run on the device (`on`), not only the runs that record:
    /// what a run that follows its plan waits for its fetches is then
    /// measured (the stall model's prediction, checked).
    pub(crate) fn set_time_every_run(&mut self, on: bool) {
        self.time_every_run = on;
    }

    /// Whether the running phase's run is timed: it is its phase's first
    /// (the one that becomes its recording), or every run is.
    pub(crate) fn timing(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.timed)
    }

    /// Drops the running phase's run without recording it (see
    /// `Residency::abandon_phase`).
    pub(crate) fn abandon(&mut self) {
        self.active = None;
    }

    /// Ends the running phase, keeping its steps as the phase's recording
    /// when it had none or departed from it (returned, for the caller to
    /// choose its stable set).
    pub(crate) fn end(&mut self) -> RunEnd<'_> {
        let Some(active) = self.active.take() else {
            return RunEnd::Nothing;
        };
        let key = active.key;
        let matched = active.following
            && self
                .recordings
                .get(&key)
                .is_some_and(|r| r.steps.len() == active.steps.len());
        if matched {
            return RunEnd::Followed;
        }
        if active.steps.is_empty() {
            return RunEnd::Nothing;
        }
        self.recordings.insert(key, Recording::new(active.steps));
        self.last_recorded = Some(key);
        match self.recordings.get_mut(&key) {
            Some(recording) => RunEnd::Recorded(recording),
            None => RunEnd::Nothing,
        }
    }

    /// Records one step (the streamed objects an operation declared, in a
    /// fixed order). Returns whether the look-ahead is on: the run follows
    /// its recording.
    pub(crate) fn step(&mut self, ids: &[AllocationId]) -> bool {
        let Some(active) = self.active.as_mut() else {
            return false;
        };
        let n = active.steps.len();
        if active.following {
            active.following = self
                .recordings
                .get(&active.key)
                .and_then(|r| r.steps.get(n))
                .is_some_and(|s| s.as_slice() == ids);
            if !active.following {
                self.departures += 1;
                self.last_departure = Some(n);
            }
        }
        active.steps.push(ids.to_vec());
        active.following
    }

    /// The recording being followed and the index of the step after the
    /// last one run, while the look-ahead is on.
    fn following(&self) -> Option<(&Recording, usize)> {
        let active = self.active.as_ref().filter(|a| a.following)?;
        let recording = self.recordings.get(&active.key)?;
        Some((recording, active.steps.len()))
    }

    /// Steps from the next one until `id` is touched again (0: the next
    /// step), while the look-ahead is on; `None` without a look-ahead or if
    /// the phase never touches `id`.
    pub(crate) fn next_use(&self, id: AllocationId) -> Option<usize> {
        self.look_ahead()?.next_use(id)
    }

    /// The look-ahead now, for asking about many objects at once (a victim
    /// search): the recording is found once instead of once per object.
    /// `None` while the look-ahead is off.
    pub(crate) fn look_ahead(&self) -> Option<LookAhead<'_>> {
        self.following()
            .map(|(recording, now)| LookAhead { recording, now })
    }

    /// The recording made last (see [`StreamingTrace`](crate::residency::StreamingTrace)).
    pub(crate) fn last_recording(&self) -> Option<&Recording> {
        self.recordings.get(&self.last_recorded?)
    }

    /// Runs that departed from their recording (the look-ahead stopped for
    /// the rest of each), and the step at which the last one did.
    pub(crate) fn departures(&self) -> (u64, Option<usize>) {
        (self.departures, self.last_departure)
    }

    /// Whether the look-ahead is on and keeps `id` resident until its next
    /// use (see [`Recording::keeps`]).
    pub(crate) fn is_stable(&self, id: AllocationId) -> bool {
        self.look_ahead().is_some_and(|a| a.keeps(id))
    }

    /// The objects of the next `window` steps, in order of first use, with
    /// the distance to their first use (0: the next step).
    pub(crate) fn upcoming(&self, window: usize) -> Vec<(AllocationId, usize)> {
        let Some((recording, now)) = self.following() else {
            return Vec::new();
        };
        let len = recording.steps.len();
        let mut first = Vec::new();
        for distance in 0..window.min(len) {
            let k = (now + distance) % len;
            let (Some(step), Some(gaps)) = (recording.steps.get(k), recording.gaps.get(k)) else {
                break;
            };
            // A use is the window's first of its object when the previous
            // use lies before the window (see `Recording::gaps`).
            first.extend(
                step.iter()
                    .zip(gaps)
                    .filter(|&(_, &gap)| gap > distance)
                    .map(|(&id, _)| (id, distance)),
            );
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::super::recording::tests::ids;
    use super::*;

    fn run(planner: &mut Planner, key: u64, steps: &[&[u64]]) -> Vec<bool> {
        planner.begin(key);
        let on = steps.iter().map(|s| planner.step(&ids(s))).collect();
        planner.end();
        on
    }

    #[test]
    fn the_first_run_records_and_the_next_ones_follow() {
        let mut p = Planner::default();
        let steps: [&[u64]; 4] = [&[1, 2], &[3], &[1], &[4]];
        assert_eq!(run(&mut p, 7, &steps), vec![false; 4]);
        assert_eq!(run(&mut p, 7, &steps), vec![true; 4]);
        // Another phase key has no recording yet.
        assert_eq!(run(&mut p, 8, &steps), vec![false; 4]);
        // Only a run that becomes its phase's recording is timed.
        p.begin(7);
        assert!(!p.timing());
        p.begin(9);
        assert!(p.timing());
        p.end();
        assert!(!p.timing());
        // Outside a phase nothing is recorded or predicted.
        assert!(!p.step(&ids(&[1])));
        assert_eq!(p.next_use(AllocationId(1)), None);
    }

    #[test]
    fn next_use_counts_steps_ahead_and_wraps_into_the_next_run() {
        let mut p = Planner::default();
        let steps: [&[u64]; 5] = [&[1, 2], &[3], &[1], &[4], &[5]];
        run(&mut p, 1, &steps);
        p.begin(1);
        assert!(p.step(&ids(&[1, 2])));
        // Next step is index 1 (object 3).
        assert_eq!(p.next_use(AllocationId(3)), Some(0));
        assert_eq!(p.next_use(AllocationId(1)), Some(1));
        assert_eq!(p.next_use(AllocationId(4)), Some(2));
        // Object 2 comes back only in the next run, at its step 0.
        assert_eq!(p.next_use(AllocationId(2)), Some(4));
        assert_eq!(p.next_use(AllocationId(9)), None);
        assert_eq!(
            p.upcoming(3),
            vec![
                (AllocationId(3), 0),
                (AllocationId(1), 1),
                (AllocationId(4), 2)
            ]
        );
        // The window wraps, and each object is listed once.
        assert!(p.step(&ids(&[3])));
        assert!(p.step(&ids(&[1])));
        assert!(p.step(&ids(&[4])));
        assert_eq!(
            p.upcoming(3),
            vec![
                (AllocationId(5), 0),
                (AllocationId(1), 1),
                (AllocationId(2), 1),
                (AllocationId(3), 2)
            ]
        );
    }

    #[test]
    fn a_run_that_departs_stops_the_look_ahead_and_is_recorded() {
        let mut p = Planner::default();
        run(&mut p, 1, &[&[1], &[2], &[3]]);
        assert_eq!(
            run(&mut p, 1, &[&[1], &[9], &[3]]),
            vec![true, false, false]
        );
        assert_eq!(p.departures(), (1, Some(1)));
        // The departed run is the recording now.
        assert_eq!(run(&mut p, 1, &[&[1], &[9], &[3]]), vec![true; 3]);
        // A longer run than the recording replaces it too.
        assert_eq!(
            run(&mut p, 1, &[&[1], &[9], &[3], &[4]]),
            vec![true, true, true, false]
        );
        assert_eq!(run(&mut p, 1, &[&[1], &[9], &[3], &[4]]), vec![true; 4]);
    }

    #[test]
    fn upcoming_lists_each_objects_first_use_in_the_window_as_a_scan_does() {
        use rand_core::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(17);
        for case in 0..200u64 {
            // Short and long cycles over a few objects, some steps naming
            // an object twice.
            let len = 1 + rng.next_u64() % 40;
            let objects = 1 + rng.next_u64() % 12;
            let steps: Vec<Vec<u64>> = (0..len)
                .map(|_| {
                    (0..rng.next_u64() % 4)
                        .map(|_| 1 + rng.next_u64() % objects)
                        .collect()
                })
                .collect();
            let mut p = Planner::default();
            let as_slices: Vec<&[u64]> = steps.iter().map(Vec::as_slice).collect();
            run(&mut p, 1, &as_slices);
            p.begin(1);
            let now = (rng.next_u64() % len) as usize;
            for step in steps.iter().take(now) {
                p.step(&ids(step));
            }
            let window = 1 + (rng.next_u64() % 60) as usize;
            // The reference: walk the window, keep each object's first use.
            let mut want: Vec<(AllocationId, usize)> = Vec::new();
            for distance in 0..window.min(steps.len()) {
                for &id in &steps[(now + distance) % steps.len()] {
                    if !want.iter().any(|&(seen, _)| seen == AllocationId(id)) {
                        want.push((AllocationId(id), distance));
                    }
                }
            }
            assert_eq!(
                p.upcoming(window),
                want,
                "case {case}: {steps:?}, now {now}, window {window}"
            );
        }
    }
}
