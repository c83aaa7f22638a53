//! Timing a recorded run on the device: each step's compute, from events on
//! the compute stream at the step boundaries, and the rate of the copies,
//! from events around each fetch on the copy stream. The run a phase
//! records is timed (the look-ahead's stall model reads it, see
//! [`plan`](super::plan)), and on request runs that follow it (their waits
//! for fetches are the stalls the model predicts); the events are read
//! once, when the phase ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::cuda::{Event, GpuDevice};
use crate::{Result, StreamId};

/// What the device measured over a timed run (see
/// [`ResidencyDriver::take_run_times`](super::ResidencyDriver::take_run_times)).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunTimes {
    /// Each step's compute in seconds, in step order: from the step's start
    /// (after the compute stream's waits for its fetches) to the end of the
    /// work queued before the next step's waits (or the run's end).
    pub steps: Vec<f64>,
    /// Each step's wait in seconds, in step order: from the end of the step
    /// before to its start, the compute stream's waits for the step's
    /// fetches (0 for the first step).
    pub waits: Vec<f64>,
    /// The copies' rate in bytes per second (bytes fetched over the copies'
    /// own device time), where any were timed.
    pub copy_rate: Option<f64>,
}

impl RunTimes {
    /// The steps' compute, summed, in seconds.
    pub fn compute(&self) -> f64 {
        self.steps.iter().sum()
    }

    /// The steps' waits, summed, in seconds.
    pub fn wait(&self) -> f64 {
        self.waits.iter().sum()
    }
}

/// The events of a run being timed.
#[derive(Debug, Default)]
pub(crate) struct RunClock {
    on: AtomicBool,
    /// Each step's start and, once known, its end.
    steps: Mutex<Vec<(Event, Option<Event>)>>,
    /// Each timed copy: its bytes, and events before and after it.
    copies: Mutex<Vec<(u64, Event, Event)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RunClock {
    /// Starts timing a run, forgetting any earlier one (`on`), or stops.
    pub(crate) fn time_run(&self, on: bool) {
        lock(&self.steps).clear();
        lock(&self.copies).clear();
        self.on.store(on, Ordering::Relaxed);
    }

    /// Whether a run is being timed.
    pub(crate) fn timing(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Marks a step's start on the compute stream.
    pub(crate) fn step_started(&self, gpu: &GpuDevice) -> Result<()> {
        if self.timing() {
            let event = gpu.record_timing_event(StreamId::Compute)?;
            lock(&self.steps).push((event, None));
        }
        Ok(())
    }

    /// Marks the end of the step begun last (a no-op when it has one).
    pub(crate) fn step_ended(&self, gpu: &GpuDevice) -> Result<()> {
        if self.timing() {
            let mut steps = lock(&self.steps);
            if let Some(last) = steps.last_mut().filter(|s| s.1.is_none()) {
                last.1 = Some(gpu.record_timing_event(StreamId::Compute)?);
            }
        }
        Ok(())
    }

    /// An event before a copy on the copy stream, while timing.
    pub(crate) fn before_copy(&self, gpu: &GpuDevice) -> Result<Option<Event>> {
        if !self.timing() {
            return Ok(None);
        }
        gpu.record_timing_event(StreamId::Copy).map(Some)
    }

    /// Records a timed copy of `bytes` that began at `before`.
    pub(crate) fn copied(&self, gpu: &GpuDevice, bytes: u64, before: Event) -> Result<()> {
        let after = gpu.record_timing_event(StreamId::Copy)?;
        lock(&self.copies).push((bytes, before, after));
        Ok(())
    }

    /// Stops timing and reads the run's events (waiting for them): `None`
    /// when nothing was timed or a step has no end.
    pub(crate) fn take(&self) -> Result<Option<RunTimes>> {
        if !self.on.swap(false, Ordering::Relaxed) {
            return Ok(None);
        }
        let steps = std::mem::take(&mut *lock(&self.steps));
        let copies = std::mem::take(&mut *lock(&self.copies));
        let mut times = Vec::with_capacity(steps.len());
        let mut waits = Vec::with_capacity(steps.len());
        let mut previous: Option<&Event> = None;
        for (start, end) in &steps {
            let Some(end) = end else {
                return Ok(None);
            };
            times.push(seconds_between(start, end)?);
            waits.push(match previous {
                Some(before) => seconds_between(before, start)?,
                None => 0.0,
            });
            previous = Some(end);
        }
        let (mut bytes, mut seconds) = (0u64, 0.0f64);
        for (b, before, after) in &copies {
            bytes += b;
            seconds += seconds_between(before, after)?;
        }
        let copy_rate = (bytes > 0 && seconds > 0.0).then(|| bytes as f64 / seconds);
        Ok((!times.is_empty()).then_some(RunTimes {
            steps: times,
            waits,
            copy_rate,
        }))
    }
}

/// Seconds as whole nanoseconds (never negative), so that figures compare
/// exactly.
pub(super) fn nanos(seconds: f64) -> u64 {
    (seconds * 1e9).round().max(0.0) as u64
}

/// Device time from `from` to `to`, in seconds (never negative).
fn seconds_between(from: &Event, to: &Event) -> Result<f64> {
    Ok(f64::from(from.elapsed_ms(to)?.max(0.0)) / 1e3)
}
