//! Running cells: the [`CellRunner`] seam (tests put a mock behind it) and
//! the sweep's own runner, a child process per cell under a time limit.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hemem_memory::policy::{Divergence, PolicyKind};

use super::cell::{Cell, CellRecord, CellSettings, CellStatus, TraceFiles};
use crate::{Error, Result};

/// Runs one cell and says how it went; never fails (a failure is a status).
pub trait CellRunner {
    /// Runs `cell`.
    fn run(&mut self, cell: &Cell) -> CellRecord;

    /// The settings the cells run with (written into records of cells that
    /// produced none).
    fn settings(&self) -> &CellSettings;
}

/// Runs each cell in a child process: `program prefix… --preset … --budget
/// … --policy … --op … --warmup W --iterations K --device D
/// --exit-with-parent`, which prints one [`CellRecord`] as a JSON line
/// (`hemem bench oversub-cell` does). The child's standard input is a pipe
/// held open while the runner waits; with `--exit-with-parent` the child
/// exits when it closes, so a sweep killed from outside leaves no cell
/// holding the GPU.
/// A child still running at the time limit is killed and its cell marked
/// [`CellStatus::Timeout`]; one that exits without a record is
/// [`CellStatus::Crashed`] (a signal, an abort, the out-of-memory killer),
/// with its exit status and the end of its standard error as the reason.
///
/// A `profiled` cell runs twice: first a recording child under `static`
/// writes the allocation trace to the trace folder, then the replay child
/// reads it; each has the full time limit, and a failed recording marks the
/// cell with the recording's status.
#[derive(Debug, Clone)]
pub struct ChildProcessRunner {
    program: PathBuf,
    prefix: Vec<OsString>,
    settings: CellSettings,
    time_limit: Duration,
    trace_dir: PathBuf,
}

/// How much of a crashed child's standard error the reason keeps.
const STDERR_TAIL: usize = 600;

impl ChildProcessRunner {
    /// A runner of `program` with `prefix` before each cell's arguments;
    /// `profiled` recordings go to `trace_dir`.
    pub fn new(
        program: impl Into<PathBuf>,
        prefix: Vec<OsString>,
        settings: CellSettings,
        time_limit: Duration,
        trace_dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            program: program.into(),
            prefix,
            settings,
            time_limit,
            trace_dir: trace_dir.into(),
        }
    }

    /// A runner that re-invokes the running executable as
    /// `hemem bench oversub-cell`.
    ///
    /// # Errors
    /// [`Error::Io`] when the executable's path cannot be found.
    pub fn current_exe(
        settings: CellSettings,
        time_limit: Duration,
        trace_dir: impl Into<PathBuf>,
    ) -> Result<Self> {
        let exe =
            std::env::current_exe().map_err(Error::io("finding", Path::new("the executable")))?;
        Ok(Self::new(
            exe,
            vec!["bench".into(), "oversub-cell".into()],
            settings,
            time_limit,
            trace_dir,
        ))
    }

    /// The arguments after the prefix for `cell`.
    pub fn cell_args(&self, cell: &Cell, traces: &TraceFiles) -> Vec<OsString> {
        let [preset, budget, policy, op] = cell.key();
        let s = &self.settings;
        let mut args: Vec<OsString> = [
            "--preset".into(),
            preset,
            "--budget".into(),
            budget,
            "--policy".into(),
            policy,
            "--op".into(),
            op,
            "--warmup".into(),
            s.warmup.to_string(),
            "--iterations".into(),
            s.iterations.to_string(),
            "--device".into(),
            s.device.to_string(),
            "--on-divergence".into(),
            match s.on_divergence {
                Divergence::Error => "error".into(),
                Divergence::FallBackToStatic => "static".into(),
            },
            "--exit-with-parent".into(),
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        if !s.cupti {
            args.push("--no-cupti".into());
        }
        if let Some(path) = &traces.record {
            args.extend(["--record-trace".into(), path.clone().into_os_string()]);
        }
        if let Some(path) = &traces.replay {
            args.extend(["--trace".into(), path.clone().into_os_string()]);
        }
        args
    }

    /// Where the recording of a `profiled` cell goes.
    pub fn trace_path(&self, cell: &Cell) -> PathBuf {
        self.trace_dir.join(format!(
            "{}-{}-{}.csv",
            cell.preset.name(),
            cell.budget,
            cell.operation
        ))
    }

    fn run_child(&self, cell: &Cell, traces: &TraceFiles) -> CellRecord {
        let started = Instant::now();
        let unmeasured = |status, reason: String| {
            let mut r = CellRecord::unmeasured(cell, &self.settings, status, reason);
            r.seconds = started.elapsed().as_secs_f64();
            r
        };
        let child = Command::new(&self.program)
            .args(&self.prefix)
            .args(self.cell_args(cell, traces))
            // The child exits when this pipe closes (`--exit-with-parent`):
            // a sweep that is itself killed leaves no cell running.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                return unmeasured(
                    CellStatus::Failed,
                    format!("could not start {}: {e}", self.program.display()),
                );
            }
        };
        let parent_alive = child.stdin.take();
        let stdout = reader(child.stdout.take());
        let stderr = reader(child.stderr.take());
        // A limit past what an Instant can add (1e19 s) is no limit.
        let deadline = started.checked_add(self.time_limit);
        let status = wait_until(&mut child, deadline);
        drop(parent_alive);
        let Some(status) = status else {
            // The readers are left to finish on their own: a process the
            // child started may still hold its pipes open.
            drop((stdout, stderr));
            return unmeasured(
                CellStatus::Timeout,
                format!(
                    "killed at the time limit of {} s",
                    self.time_limit.as_secs_f64()
                ),
            );
        };
        let (stdout, stderr) = (joined(stdout), joined(stderr));
        let reported = stdout
            .lines()
            .rev()
            .find_map(|line| serde_json::from_str::<CellRecord>(line).ok());
        match reported {
            Some(record) if record.key() == cell.key() => record,
            Some(record) => unmeasured(
                CellStatus::Failed,
                format!("the child reported another cell: {:?}", record.key()),
            ),
            None => unmeasured(CellStatus::Crashed, crash_reason(status, &stderr)),
        }
    }
}

/// Reads a child's pipe to the end on its own thread (so neither pipe can
/// fill up and block the child).
fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> Option<JoinHandle<String>> {
    pipe.map(|mut p| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            // A read error leaves what was read: the report is judged on it.
            let _ = p.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    })
}

fn joined(handle: Option<JoinHandle<String>>) -> String {
    handle.and_then(|h| h.join().ok()).unwrap_or_default()
}

/// Waits for `child` until `deadline` (`None`: no deadline); kills it then
/// (`None`).
fn wait_until(child: &mut Child, deadline: Option<Instant>) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if deadline.is_none_or(|d| Instant::now() < d) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                // Killing a child that has just exited fails harmlessly;
                // wait reaps it either way.
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

fn crash_reason(status: ExitStatus, stderr: &str) -> String {
    let tail: String = {
        let chars: Vec<char> = stderr.trim().chars().collect();
        let from = chars.len().saturating_sub(STDERR_TAIL);
        chars.get(from..).unwrap_or_default().iter().collect()
    };
    let tail = tail.replace('\n', " | ");
    format!(
        "no report ({status}){}",
        if tail.is_empty() {
            String::new()
        } else {
            format!(": {tail}")
        }
    )
}

impl CellRunner for ChildProcessRunner {
    fn run(&mut self, cell: &Cell) -> CellRecord {
        if cell.policy != PolicyKind::Profiled {
            return self.run_child(cell, &TraceFiles::default());
        }
        let trace = self.trace_path(cell);
        if let Err(e) = std::fs::create_dir_all(&self.trace_dir) {
            return CellRecord::unmeasured(
                cell,
                &self.settings,
                CellStatus::Failed,
                format!("creating {}: {e}", self.trace_dir.display()),
            );
        }
        let recording = Cell {
            policy: PolicyKind::Static.into(),
            ..*cell
        };
        let recorded = self.run_child(
            &recording,
            &TraceFiles {
                record: Some(trace.clone()),
                replay: None,
            },
        );
        if recorded.status != CellStatus::Ok {
            let mut r = CellRecord::unmeasured(
                cell,
                &self.settings,
                recorded.status,
                format!("the recording run under static: {}", recorded.reason),
            );
            r.seconds = recorded.seconds;
            return r;
        }
        let mut replay = self.run_child(
            cell,
            &TraceFiles {
                record: None,
                replay: Some(trace),
            },
        );
        replay.seconds += recorded.seconds;
        replay
    }

    fn settings(&self) -> &CellSettings {
        &self.settings
    }
}

#[cfg(test)]
mod tests {
    use hemem_ckks::prelude::{DeviceSelection, Preset};

    use super::*;
    use crate::bench::oversub::{Budget, Operation};

    fn cell(policy: PolicyKind) -> Cell {
        Cell {
            preset: Preset::TestFTb,
            budget: Budget(Some(2 << 30)),
            policy: policy.into(),
            operation: Operation::Add,
        }
    }

    fn settings() -> CellSettings {
        CellSettings {
            device: DeviceSelection::Cpu,
            warmup: 1,
            iterations: 2,
            ..CellSettings::default()
        }
    }

    /// A runner of `sh -c SCRIPT`; the cell's arguments become `$1`, `$2`, ….
    fn shell(script: &str, limit: Duration) -> ChildProcessRunner {
        ChildProcessRunner::new(
            "sh",
            vec!["-c".into(), script.into(), "sh".into()],
            settings(),
            limit,
            std::env::temp_dir(),
        )
    }

    #[test]
    fn arguments_name_the_cell_and_settings() {
        let runner = shell("true", Duration::from_secs(1));
        let args: Vec<String> = runner
            .cell_args(
                &cell(PolicyKind::Device),
                &TraceFiles {
                    record: None,
                    replay: Some("t.csv".into()),
                },
            )
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args.join(" "),
            "--preset test-FTb --budget 2GiB --policy device --op add --warmup 1 \
             --iterations 2 --device cpu --on-divergence error --exit-with-parent --trace t.csv"
        );
    }

    #[test]
    fn a_hung_child_is_killed_and_marked_timeout() {
        let mut runner = shell("exec sleep 30", Duration::from_millis(300));
        let started = Instant::now();
        let record = runner.run(&cell(PolicyKind::Device));
        assert_eq!(record.status, CellStatus::Timeout);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(record.median_ms, None);
        assert_eq!(record.key(), cell(PolicyKind::Device).key());
    }

    #[test]
    fn a_child_without_a_report_is_marked_crashed() {
        let mut runner = shell("echo boom >&2; kill -9 $$", Duration::from_secs(20));
        let record = runner.run(&cell(PolicyKind::Managed));
        assert_eq!(record.status, CellStatus::Crashed);
        assert!(record.reason.contains("boom"), "{}", record.reason);
    }

    #[test]
    fn the_childs_report_is_taken_as_is() {
        let mut over = CellRecord::unmeasured(
            &cell(PolicyKind::Device),
            &settings(),
            CellStatus::OverBudget,
            "over the device budget",
        );
        over.seconds = 0.5;
        let line = serde_json::to_string(&over).expect("json");
        let script = format!("echo 'progress…'; echo '{line}'");
        let mut runner = shell(&script, Duration::from_secs(20));
        assert_eq!(runner.run(&cell(PolicyKind::Device)), over);
        // A report of another cell is not taken.
        let record = runner.run(&cell(PolicyKind::Static));
        assert_eq!(record.status, CellStatus::Failed);
    }

    #[test]
    fn a_profiled_cell_records_first_and_stops_if_the_recording_fails() {
        let dir = tempfile::tempdir().expect("dir");
        let mut runner = ChildProcessRunner::new(
            "sh",
            vec!["-c".into(), "exit 3".into(), "sh".into()],
            settings(),
            Duration::from_secs(20),
            dir.path().join("traces"),
        );
        let record = runner.run(&cell(PolicyKind::Profiled));
        assert_eq!(record.status, CellStatus::Crashed);
        assert!(
            record.reason.starts_with("the recording run"),
            "{}",
            record.reason
        );
        assert_eq!(record.policy, "profiled");
        assert!(dir.path().join("traces").is_dir());
    }
}
