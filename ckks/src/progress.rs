//! Progress of long operations (key generation, encoding a bootstrap's
//! diagonals, benchmark sweeps): the library reports steps done to a
//! [`Progress`] observer and draws nothing itself; the `hemem` CLI turns the
//! reports into a progress bar on a terminal.

/// Observes a long operation: `update(done, total)` after each step.
///
/// Any `Fn(u64, u64) + Sync` closure is one; [`NoProgress`] ignores
/// everything. Calls come from the thread that runs the operation, in
/// order, starting with `done = 0`; `total` may grow between calls when an
/// operation learns of more work.
pub trait Progress: Sync {
    /// `done` of `total` steps are finished.
    fn update(&self, done: u64, total: u64);
}

impl<F: Fn(u64, u64) + Sync> Progress for F {
    fn update(&self, done: u64, total: u64) {
        self(done, total);
    }
}

/// A [`Progress`] that ignores every report (what the operations without a
/// `_with_progress` suffix use).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn update(&self, _done: u64, _total: u64) {}
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn closures_observe_and_no_progress_ignores() {
        let seen = Mutex::new(Vec::new());
        let observer = |done: u64, total: u64| {
            seen.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((done, total));
        };
        let progress: &dyn Progress = &observer;
        progress.update(0, 2);
        progress.update(2, 2);
        NoProgress.update(1, 1);
        assert_eq!(
            *seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            [(0, 2), (2, 2)]
        );
    }
}
