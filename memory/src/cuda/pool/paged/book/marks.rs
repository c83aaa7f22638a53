//! Frees numbered per stream, and the events ("marks") that tell when the
//! device has passed them: which cached pages another stream may take with
//! no wait, and what the host waits for before unmapping a page.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::{Book, PageDriver, nanos_since, stream_of};
use crate::Result;

/// A mark is recorded on a stream at least every this many frees on it.
const MARK_EVERY: u64 = 8;

/// One stream's frees. Frees are numbered; events ("marks") are recorded
/// on the stream now and then, not at every free: a mark recorded after
/// free `n` was queued stands for every free up to `n` (waiting on a later
/// point of the stream is waiting longer, never too little). This keeps
/// the driver out of nearly every free: an event at every free cost 1–2 ms
/// more host time a bootstrap and shortened no wait (FGb under 2 GiB, H100,
/// docs/BENCHMARKS.md "Fourteenth session").
pub(super) struct Lane<E> {
    /// Frees so far.
    freed: u64,
    /// Every free up to this one is known complete.
    done: u64,
    /// Marks not yet known complete: (the last free before it, event).
    marks: VecDeque<(u64, Arc<E>)>,
    /// Frees since the last mark.
    since_mark: u64,
}

impl<E> Default for Lane<E> {
    fn default() -> Self {
        Self {
            freed: 0,
            done: 0,
            marks: VecDeque::new(),
            since_mark: 0,
        }
    }
}

impl<E> Lane<E> {
    /// Counts a free: its number, and whether a mark is due.
    pub(super) fn count_free(&mut self) -> (u64, bool) {
        self.freed += 1;
        self.since_mark += 1;
        (self.freed, self.since_mark >= MARK_EVERY)
    }

    /// Whether free `n` is known complete.
    pub(super) fn known_done(&self, n: u64) -> bool {
        n <= self.done
    }
}

impl<D: PageDriver> Book<D> {
    /// Whether free `n` of `lane` is complete, by the first mark after it
    /// (recorded now when there is none, so the next question finds one).
    pub(super) fn is_done(&mut self, lane: usize, n: u64) -> Result<bool> {
        let done = self.lanes.get(lane).is_none_or(|l| n <= l.done);
        if done {
            return Ok(true);
        }
        let (through, mark) = self.mark_after(lane, n)?;
        if !self.driver.is_complete(&mark)? {
            return Ok(false);
        }
        self.passed(lane, through);
        Ok(true)
    }

    /// The first mark of `lane` after free `n`, recording one now when
    /// there is none: (the last free it stands for, its event).
    pub(super) fn mark_after(&mut self, lane: usize, n: u64) -> Result<(u64, Arc<D::Event>)> {
        if let Some((through, event)) = self
            .lanes
            .get(lane)
            .and_then(|l| l.marks.iter().find(|(through, _)| *through >= n))
        {
            return Ok((*through, Arc::clone(event)));
        }
        self.mark(lane)
    }

    /// Records a mark on `lane`'s stream, after dropping the oldest marks
    /// the device has passed (so that marks nobody asks about do not pile
    /// up).
    pub(super) fn mark(&mut self, lane: usize) -> Result<(u64, Arc<D::Event>)> {
        self.refresh(lane)?;
        let event = Arc::new(self.driver.record(stream_of(lane))?);
        let Some(l) = self.lanes.get_mut(lane) else {
            return Ok((0, event));
        };
        l.since_mark = 0;
        l.marks.push_back((l.freed, Arc::clone(&event)));
        Ok((l.freed, event))
    }

    /// Every free of `lane` up to `through` is complete: earlier marks go.
    pub(super) fn passed(&mut self, lane: usize, through: u64) {
        if let Some(l) = self.lanes.get_mut(lane) {
            l.done = l.done.max(through);
            while l.marks.front().is_some_and(|(t, _)| *t <= l.done) {
                l.marks.pop_front();
            }
        }
    }

    /// Blocks until free `n` of `lane` is complete.
    pub(super) fn wait_host(&mut self, lane: usize, n: u64) -> Result<()> {
        if self.is_done(lane, n)? {
            return Ok(());
        }
        let (through, mark) = self.mark_after(lane, n)?;
        let started = Instant::now();
        self.driver.synchronize(&mark)?;
        self.activity.host_wait_ns += nanos_since(started);
        self.activity.host_waits += 1;
        self.passed(lane, through);
        Ok(())
    }

    /// Learns which of `lane`'s marks the device has passed.
    pub(super) fn refresh(&mut self, lane: usize) -> Result<()> {
        while let Some((through, oldest)) = self
            .lanes
            .get(lane)
            .and_then(|l| l.marks.front())
            .map(|(t, e)| (*t, Arc::clone(e)))
        {
            if !self.driver.is_complete(&oldest)? {
                break;
            }
            self.passed(lane, through);
        }
        Ok(())
    }
}
