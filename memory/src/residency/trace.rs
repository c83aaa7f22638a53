//! A phase's streaming workload, written out and read back: the budget and
//! the look-ahead's settings, every streamed object's bytes, the order the
//! phase was recorded in and its device times. A trace taken on the GPU
//! (`hemem bootstrap --streaming-trace FILE`) replays on the CPU through
//! the recording mock driver (the ignored test `replays_a_streaming_trace`,
//! `HEMEM_STREAMING_TRACE=FILE`), so that the look-ahead's decisions over a
//! real bootstrap's order can be examined, run after run, without a GPU.
//!
//! The file is text, one item per line: a header, `key value` settings,
//! `object ID BYTES`, and one `step ID…` and `time SECONDS` per recorded
//! step, in order.

use std::fmt::Write as _;
use std::path::Path;

use super::Residency;
use super::plan::StreamingPlan;
use crate::error::{TraceError, TraceFault};
use crate::{Error, Result};

/// The first line of a streaming trace.
const HEADER: &str = "hemem-streaming-trace 1";

/// A recorded phase and the settings it ran under (see the module's
/// documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamingTrace {
    /// The device budget in bytes.
    pub budget: u64,
    /// The look-ahead's margin: 1/`margin` of the budget.
    pub margin: u64,
    /// The streaming reserve, in steps, and the window split's slack.
    pub reserve: f64,
    /// See `reserve`.
    pub slack: f64,
    /// How the recording was split (`auto` resolved).
    pub plan: StreamingPlan,
    /// Whether streamed objects share the arena's chunks.
    pub arena: bool,
    /// The most pool bytes everything but streamed objects held, and the
    /// room the pool's refusals made the look-ahead leave, when the trace
    /// was taken.
    pub others_peak: u64,
    /// See `others_peak`.
    pub refusal_headroom: u64,
    /// Every streamed object the recording touches: id and bytes.
    pub objects: Vec<(u64, u64)>,
    /// The recorded steps: the ids each declared.
    pub steps: Vec<Vec<u64>>,
    /// Each step's compute in seconds, where the recorded run was timed,
    /// and the copies' rate in bytes per second, where it was measured.
    pub step_seconds: Vec<f64>,
    /// See `step_seconds`.
    pub copy_rate: Option<f64>,
}

impl Residency {
    /// The phase recorded last and the settings now, as a
    /// [`StreamingTrace`]; `None` before any phase was recorded.
    pub fn streaming_trace(&self) -> Option<StreamingTrace> {
        let s = self.lock();
        let recording = s.planner.last_recording()?;
        let steps: Vec<Vec<u64>> = recording
            .steps
            .iter()
            .map(|step| step.iter().map(|id| id.0).collect())
            .collect();
        let mut objects: Vec<(u64, u64)> = recording
            .positions
            .keys()
            .filter_map(|id| s.streamed.entries.get(id).map(|e| (id.0, e.bytes)))
            .collect();
        objects.sort_unstable();
        let times = recording.times.as_ref();
        Some(StreamingTrace {
            budget: s.budget,
            margin: s.streaming_margin,
            reserve: s.streaming_reserve,
            slack: s.streaming_slack,
            plan: s.split_plan.unwrap_or(s.streaming_plan),
            arena: s.streaming_arena,
            others_peak: s.streamed.others_peak,
            refusal_headroom: s.streamed.refusal_headroom,
            objects,
            steps,
            step_seconds: times.map(|t| t.compute.clone()).unwrap_or_default(),
            copy_rate: times.filter(|t| t.rate_measured).map(|t| t.rate),
        })
    }
}

impl StreamingTrace {
    /// The trace as text (see the module's documentation).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let settings = [
            ("budget", self.budget.to_string()),
            ("margin", self.margin.to_string()),
            ("reserve", self.reserve.to_string()),
            ("slack", self.slack.to_string()),
            ("plan", self.plan.name().to_owned()),
            ("arena", u8::from(self.arena).to_string()),
            ("others_peak", self.others_peak.to_string()),
            ("refusal_headroom", self.refusal_headroom.to_string()),
        ];
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{HEADER}");
        for (key, value) in settings {
            let _ = writeln!(out, "{key} {value}");
        }
        if let Some(rate) = self.copy_rate {
            let _ = writeln!(out, "copy_rate {rate}");
        }
        for (id, bytes) in &self.objects {
            let _ = writeln!(out, "object {id} {bytes}");
        }
        for step in &self.steps {
            out.push_str("step");
            for id in step {
                let _ = write!(out, " {id}");
            }
            out.push('\n');
        }
        for t in &self.step_seconds {
            let _ = writeln!(out, "time {t}");
        }
        out
    }

    /// Writes the trace to `path`.
    ///
    /// # Errors
    /// [`TraceError::Io`] when the file cannot be written.
    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.to_text()).map_err(|e| io_error(path, &e))
    }

    /// Reads a trace written by [`StreamingTrace::write`].
    ///
    /// # Errors
    /// [`TraceError::Io`] when the file cannot be read;
    /// [`TraceError::Malformed`] naming the first bad line.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| io_error(path, &e))?;
        Self::parse(&text)
    }

    /// Parses the text of a trace.
    ///
    /// # Errors
    /// [`TraceError::Malformed`] naming the first bad line: a missing
    /// header, an unknown keyword, a value that does not parse, an object
    /// declared twice, a step naming an undeclared object, no budget, or a
    /// count of times other than zero or one per step.
    pub fn parse(text: &str) -> Result<Self> {
        let mut lines = text.lines().enumerate().map(|(n, l)| (n + 1, l.trim()));
        let malformed = |line, fault| -> Error { TraceError::Malformed { line, fault }.into() };
        match lines.next() {
            Some((_, HEADER)) => {}
            Some((line, _)) => return Err(malformed(line, TraceFault::StreamingHeader)),
            None => return Err(malformed(1, TraceFault::Empty)),
        }
        let mut trace = Self {
            budget: 0,
            margin: 1,
            reserve: 0.0,
            slack: 0.0,
            plan: StreamingPlan::default(),
            arena: true,
            others_peak: 0,
            refusal_headroom: 0,
            objects: Vec::new(),
            steps: Vec::new(),
            step_seconds: Vec::new(),
            copy_rate: None,
        };
        let mut known = std::collections::HashSet::new();
        for (line, text) in lines.filter(|(_, l)| !l.is_empty()) {
            let bad = |fault| malformed(line, fault);
            let mut words = text.split_ascii_whitespace();
            let key = words.next().unwrap_or_default();
            let values: Vec<&str> = words.collect();
            let int = |i: usize| -> Result<u64> {
                values
                    .get(i)
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| bad(TraceFault::StreamingValue))
            };
            let real = |i: usize| -> Result<f64> {
                values
                    .get(i)
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| bad(TraceFault::StreamingValue))
            };
            match key {
                "budget" => trace.budget = int(0)?,
                "margin" => trace.margin = int(0)?.max(1),
                "reserve" => trace.reserve = real(0)?,
                "slack" => trace.slack = real(0)?,
                "plan" => {
                    trace.plan = values
                        .first()
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| bad(TraceFault::StreamingValue))?;
                }
                "arena" => trace.arena = int(0)? != 0,
                "others_peak" => trace.others_peak = int(0)?,
                "refusal_headroom" => trace.refusal_headroom = int(0)?,
                "copy_rate" => trace.copy_rate = Some(real(0)?),
                "object" => {
                    let (id, bytes) = (int(0)?, int(1)?);
                    if !known.insert(id) {
                        return Err(bad(TraceFault::DuplicateId));
                    }
                    trace.objects.push((id, bytes));
                }
                "step" => {
                    let ids = (0..values.len()).map(int).collect::<Result<Vec<u64>>>()?;
                    if ids.iter().any(|id| !known.contains(id)) {
                        return Err(bad(TraceFault::StreamingValue));
                    }
                    trace.steps.push(ids);
                }
                "time" => trace.step_seconds.push(real(0)?),
                _ => return Err(bad(TraceFault::StreamingKeyword)),
            }
        }
        // No budget, or times that do not match the steps: the file's end
        // is where the missing lines should have been.
        let times = trace.step_seconds.len();
        if trace.budget == 0 || (times != 0 && times != trace.steps.len()) {
            return Err(malformed(text.lines().count(), TraceFault::StreamingValue));
        }
        Ok(trace)
    }
}

fn io_error(path: &Path, e: &std::io::Error) -> Error {
    TraceError::Io {
        path: path.to_owned(),
        kind: e.kind(),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::super::driver::mock::Call;
    use super::super::streamed::testing::{manager_with_arena, object};
    use super::*;
    use crate::AllocationId;

    const MIB: u64 = 1 << 20;

    /// Runs `runs` runs of the trace's order through the mock manager with
    /// the trace's settings; returns the bytes fetched in each.
    fn replay(trace: &StreamingTrace, runs: usize) -> Vec<u64> {
        replay_timed(trace, runs)
            .into_iter()
            .map(|(b, _)| b)
            .collect()
    }

    /// [`replay`], with each run's host time in the manager (seconds): what
    /// the look-ahead's decisions cost the host per run.
    fn replay_timed(trace: &StreamingTrace, runs: usize) -> Vec<(u64, f64)> {
        let (r, d, _) = manager_with_arena(trace.budget, trace.arena);
        r.set_streaming_margin(trace.margin);
        r.set_streaming_reserve(trace.reserve);
        r.set_streaming_slack(trace.slack);
        r.set_streaming_plan(trace.plan);
        if !trace.step_seconds.is_empty() {
            *d.step_durations.lock().expect("durations") = trace.step_seconds.clone();
            *d.copy_rate.lock().expect("rate") = trace.copy_rate;
        }
        for &(id, bytes) in &trace.objects {
            object(&r, id, bytes);
        }
        {
            // What everything else held at its peak, and the refusals'
            // room, as the traced run left them.
            let mut s = r.lock();
            s.streamed.others_peak = trace.others_peak;
            s.streamed.refusal_headroom = trace.refusal_headroom;
        }
        let sizes: std::collections::HashMap<u64, u64> = trace.objects.iter().copied().collect();
        let mut fetched = Vec::with_capacity(runs);
        for _ in 0..runs {
            d.take();
            let start = std::time::Instant::now();
            r.begin_phase(1, 1);
            for step in &trace.steps {
                let ids: Vec<AllocationId> = step.iter().map(|&n| AllocationId(n)).collect();
                drop(r.prepare(&ids).expect("the traced order fits its budget"));
            }
            r.end_phase();
            let seconds = start.elapsed().as_secs_f64();
            fetched.push((
                d.take()
                    .iter()
                    .filter_map(|c| match c {
                        Call::Fetch(n) => sizes.get(n),
                        _ => None,
                    })
                    .sum(),
                seconds,
            ));
        }
        fetched
    }

    /// A small trace: twelve objects of 3–9 MiB used in stages of three,
    /// each stage by four "ciphertexts" in turn, under 40 MiB.
    fn small() -> StreamingTrace {
        let objects: Vec<(u64, u64)> = (1..=12).map(|n| (n, (3 + n % 7) * MIB)).collect();
        let mut steps = Vec::new();
        for stage in 0..4u64 {
            for _ in 0..4 {
                for k in 1..=3 {
                    steps.push(vec![stage * 3 + k]);
                }
            }
        }
        let step_seconds = (0..steps.len())
            .map(|k| 1e-4 * (1 + k % 3) as f64)
            .collect();
        StreamingTrace {
            budget: 40 * MIB,
            margin: 32,
            reserve: 2.0,
            slack: 0.25,
            plan: StreamingPlan::Stalls,
            arena: true,
            others_peak: 4 * MIB,
            refusal_headroom: MIB,
            objects,
            steps,
            step_seconds,
            copy_rate: Some(2e10),
        }
    }

    #[test]
    fn a_trace_reads_back_as_it_was_written() {
        let trace = small();
        assert_eq!(
            StreamingTrace::parse(&trace.to_text()).expect("parses"),
            trace
        );
        let untimed = StreamingTrace {
            step_seconds: Vec::new(),
            copy_rate: None,
            ..small()
        };
        assert_eq!(
            StreamingTrace::parse(&untimed.to_text()).expect("parses"),
            untimed
        );
    }

    #[test]
    fn a_malformed_trace_names_its_line() {
        let text = small().to_text();
        let fault = |text: &str| match StreamingTrace::parse(text) {
            Err(Error::Trace(TraceError::Malformed { line, fault })) => (line, fault),
            other => panic!("expected a malformed trace, got {other:?}"),
        };
        assert_eq!(fault(""), (1, TraceFault::Empty));
        assert_eq!(
            fault(&text.replacen(HEADER, "hemem-streaming-trace 9", 1)),
            (1, TraceFault::StreamingHeader)
        );
        assert_eq!(
            fault(&text.replacen("budget", "budgte", 1)),
            (2, TraceFault::StreamingKeyword)
        );
        assert_eq!(
            fault(&text.replacen("margin 32", "margin -3", 1)),
            (3, TraceFault::StreamingValue)
        );
        // An object twice, a step naming an unknown object, a time short.
        let first = text
            .lines()
            .position(|l| l.starts_with("object"))
            .expect("objects")
            + 1;
        let doubled = text.replacen("object 2 ", "object 1 ", 1);
        assert_eq!(fault(&doubled), (first + 1, TraceFault::DuplicateId));
        let step = text
            .lines()
            .position(|l| l.starts_with("step"))
            .expect("steps")
            + 1;
        assert_eq!(
            fault(&text.replacen("step 1\n", "step 99\n", 1)),
            (step, TraceFault::StreamingValue)
        );
        let end = text.lines().count() - 1;
        assert_eq!(
            fault(&text.replacen("budget 41943040\n", "", 1)),
            (end, TraceFault::StreamingValue)
        );
        let short = text
            .replacen("time ", "", 1)
            .replacen("\n0.0001\n", "\n", 1);
        assert!(matches!(
            StreamingTrace::parse(&short),
            Err(Error::Trace(TraceError::Malformed { .. }))
        ));
    }

    #[test]
    fn a_recorded_phase_comes_out_as_its_trace_and_replays() {
        let trace = small();
        let (r, d, _) = manager_with_arena(trace.budget, true);
        r.set_streaming_margin(trace.margin);
        *d.step_durations.lock().expect("durations") = trace.step_seconds.clone();
        *d.copy_rate.lock().expect("rate") = Some(2e10);
        assert!(r.streaming_trace().is_none(), "nothing recorded yet");
        for &(id, bytes) in &trace.objects {
            object(&r, id, bytes);
        }
        r.begin_phase(5, 1);
        for step in &trace.steps {
            let ids: Vec<AllocationId> = step.iter().map(|&n| AllocationId(n)).collect();
            drop(r.prepare(&ids).expect("fits"));
        }
        r.end_phase();
        let taken = r.streaming_trace().expect("recorded");
        assert_eq!(taken.steps, trace.steps);
        assert_eq!(taken.objects, trace.objects);
        assert_eq!(taken.step_seconds, trace.step_seconds);
        assert_eq!((taken.budget, taken.margin), (trace.budget, trace.margin));
        // Every object is fetched in the recorded run, and a replayed run
        // that follows its plan fetches no more than the recorded one.
        let runs = replay(&taken, 3);
        let all: u64 = trace.objects.iter().map(|o| o.1).sum();
        assert!(runs[0] >= all, "{runs:?}");
        assert!(runs[1..].iter().all(|&b| b > 0 && b <= runs[0]), "{runs:?}");
    }

    #[test]
    fn the_traces_of_real_bootstraps_replay_and_their_plans_beat_the_recorded_runs() {
        // Taken on the H100 (docs/traces/README.md): FGb at 2 and 4 GiB, a
        // batch of 8 at 2 GiB, FVb at 2 GiB.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/traces");
        for name in ["fgb-2gib", "fgb-4gib", "fgb-2gib-batch8", "fvb-2gib"] {
            let trace = StreamingTrace::read(&dir.join(format!("{name}.trace")))
                .expect("a streaming trace");
            assert!(
                trace.steps.len() > 100 && trace.objects.len() > 400,
                "{name}"
            );
            let runs = replay(&trace, 2);
            // The recorded run fetches everything it touches at least once;
            // the run that follows its plan fetches less.
            let touched: std::collections::HashSet<u64> =
                trace.steps.iter().flatten().copied().collect();
            let all: u64 = trace
                .objects
                .iter()
                .filter(|o| touched.contains(&o.0))
                .map(|o| o.1)
                .sum();
            assert!(runs[0] >= all, "{name}: {runs:?}");
            // FGb's plans fetch less than its recorded runs; FVb's fetches
            // a little more than its recorded run (5.12 against 5.01 GB), to
            // fetch it ahead of use.
            if name.starts_with("fgb") {
                assert!(runs[1] < runs[0], "{name}: {runs:?}");
            } else {
                assert!(runs[1] < runs[0] + runs[0] / 8, "{name}: {runs:?}");
            }
        }
    }

    /// Replays the trace named by `HEMEM_STREAMING_TRACE` (taken with
    /// `hemem bootstrap --streaming-trace FILE`) and prints each run's
    /// fetched bytes: `HEMEM_STREAMING_TRACE=FILE cargo test -p
    /// hemem-memory --release replays_a_streaming_trace -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore = "needs HEMEM_STREAMING_TRACE"]
    fn replays_a_streaming_trace() {
        let path = std::env::var("HEMEM_STREAMING_TRACE").expect("HEMEM_STREAMING_TRACE");
        let trace = StreamingTrace::read(Path::new(&path)).expect("a streaming trace");
        let runs: usize = std::env::var("HEMEM_REPLAY_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(6);
        println!(
            "{} objects, {} steps, budget {} MB",
            trace.objects.len(),
            trace.steps.len(),
            trace.budget / 1_000_000
        );
        for (run, (bytes, seconds)) in replay_timed(&trace, runs).iter().enumerate() {
            println!(
                "run {run}: {:.3} GB fetched, {:.2} ms of host time in the manager",
                *bytes as f64 / 1e9,
                seconds * 1e3
            );
        }
    }
}
