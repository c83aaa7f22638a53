//! Counters per memory class and placement.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::{MemoryClass, Placement};

/// A byte counter: what is live now, the most that was live at once, and the
/// sum of everything ever allocated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    /// Bytes live now.
    pub current: u64,
    /// The largest value `current` has had.
    pub peak: u64,
    /// Bytes ever allocated.
    pub total: u64,
}

impl Counter {
    fn add(&mut self, bytes: u64) {
        self.current += bytes;
        self.total += bytes;
        self.peak = self.peak.max(self.current);
    }

    fn sub(&mut self, bytes: u64) {
        self.current = self.current.saturating_sub(bytes);
    }
}

/// Figures for one class in one placement (or summed over placements).
///
/// The traffic fields count what the residency manager did with managed
/// memory (they stay zero for the other placements).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStatistics {
    /// Bytes.
    pub bytes: Counter,
    /// Number of allocations.
    pub allocations: u64,
    /// Number of frees.
    pub frees: u64,
    /// Allocations requested sensitive (secret-key material, zeroed before
    /// reuse or release); included in `allocations`.
    pub sensitive_allocations: u64,
    /// Frees of sensitive allocations; included in `frees`.
    pub sensitive_frees: u64,
    /// Bytes the residency manager prefetched host→device.
    pub prefetched_to_device: u64,
    /// Bytes the residency manager prefetched device→host (evictions).
    pub prefetched_to_host: u64,
    /// Buffers evicted to the host to stay under the budget.
    pub evictions: u64,
}

impl ClassStatistics {
    fn on_alloc(&mut self, bytes: u64, sensitive: bool) {
        self.bytes.add(bytes);
        self.allocations += 1;
        self.sensitive_allocations += u64::from(sensitive);
    }

    fn on_free(&mut self, bytes: u64, sensitive: bool) {
        self.bytes.sub(bytes);
        self.frees += 1;
        self.sensitive_frees += u64::from(sensitive);
    }

    fn restart_peak(&mut self) {
        self.bytes.peak = self.bytes.current;
    }

    fn merge_peak(&mut self, other: &Self) {
        self.bytes.peak = self.bytes.peak.max(other.bytes.peak);
    }
}

/// An allocation or a free, for [`StatisticsHandle::record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// An allocation of `bytes`.
    Alloc { bytes: u64, sensitive: bool },
    /// A free of `bytes`.
    Free { bytes: u64, sensitive: bool },
}

/// What the residency manager did, for [`StatisticsHandle::record_traffic`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Traffic {
    /// A prefetch to the device of this many bytes.
    ToDevice(u64),
    /// An eviction (a prefetch to the host) of this many bytes.
    Eviction(u64),
    /// A streamed object's fetch: this many bytes from its pinned master to
    /// its device slot.
    Fetch(u64),
    /// A streamed object's slot freed (nothing moves).
    Dropped,
    /// A streamed object written back to its master: this many bytes.
    WriteBack(u64),
}

/// A snapshot of the allocator's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Statistics {
    cells: [[ClassStatistics; 5]; 6],
    classes: [ClassStatistics; 6],
    placements: [ClassStatistics; 5],
    total: ClassStatistics,
    pool_trims: u64,
}

impl Statistics {
    /// One class in one placement.
    pub fn get(&self, class: MemoryClass, placement: Placement) -> ClassStatistics {
        self.cells
            .get(class.index())
            .and_then(|row| row.get(placement.index()))
            .copied()
            .unwrap_or_default()
    }

    /// One class over all placements (its peak is the peak of the sum).
    pub fn class(&self, class: MemoryClass) -> ClassStatistics {
        self.classes.get(class.index()).copied().unwrap_or_default()
    }

    /// One placement over all classes.
    pub fn placement(&self, placement: Placement) -> ClassStatistics {
        self.placements
            .get(placement.index())
            .copied()
            .unwrap_or_default()
    }

    /// Everything.
    pub fn total(&self) -> ClassStatistics {
        self.total
    }

    /// Times the device pool was trimmed to make room under the budget.
    pub fn pool_trims(&self) -> u64 {
        self.pool_trims
    }

    /// Peak bytes of each class, in [`MemoryClass::ALL`] order.
    pub fn peak_bytes_by_class(&self) -> Vec<(MemoryClass, u64)> {
        MemoryClass::ALL
            .into_iter()
            .map(|c| (c, self.class(c).bytes.peak))
            .collect()
    }

    fn record(&mut self, class: MemoryClass, placement: Placement, event: Event) {
        self.apply(class, placement, |s| match event {
            Event::Alloc { bytes, sensitive } => s.on_alloc(bytes, sensitive),
            Event::Free { bytes, sensitive } => s.on_free(bytes, sensitive),
        });
    }

    fn apply(
        &mut self,
        class: MemoryClass,
        placement: Placement,
        f: impl Fn(&mut ClassStatistics),
    ) {
        if let Some(cell) = self
            .cells
            .get_mut(class.index())
            .and_then(|row| row.get_mut(placement.index()))
        {
            f(cell);
        }
        if let Some(c) = self.classes.get_mut(class.index()) {
            f(c);
        }
        if let Some(p) = self.placements.get_mut(placement.index()) {
            f(p);
        }
        f(&mut self.total);
    }

    fn for_each_mut(&mut self, mut f: impl FnMut(&mut ClassStatistics)) {
        self.cells.iter_mut().flatten().for_each(&mut f);
        self.classes.iter_mut().for_each(&mut f);
        self.placements.iter_mut().for_each(&mut f);
        f(&mut self.total);
    }

    fn zip_mut(&mut self, other: &Self, mut f: impl FnMut(&mut ClassStatistics, &ClassStatistics)) {
        for (a, b) in self
            .cells
            .iter_mut()
            .flatten()
            .zip(other.cells.iter().flatten())
        {
            f(a, b);
        }
        for (a, b) in self.classes.iter_mut().zip(&other.classes) {
            f(a, b);
        }
        for (a, b) in self.placements.iter_mut().zip(&other.placements) {
            f(a, b);
        }
        f(&mut self.total, &other.total);
    }
}

#[derive(Debug, Default)]
struct State {
    now: Statistics,
    /// Peaks saved when a scope was opened, innermost last.
    saved: Vec<Statistics>,
}

/// Shared, thread-safe statistics state. Cloning gives another handle to the
/// same counters.
#[derive(Clone, Debug, Default)]
pub struct StatisticsHandle {
    state: Arc<Mutex<State>>,
}

impl StatisticsHandle {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked while counting;
        // the counters themselves are still meaningful.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records an allocation or a free.
    pub(crate) fn record(&self, class: MemoryClass, placement: Placement, event: Event) {
        self.lock().now.record(class, placement, event);
    }

    /// Records residency traffic of a managed buffer or a streamed object
    /// of `class` (bytes moved to the device, to the host, and evictions).
    pub(crate) fn record_traffic(&self, class: MemoryClass, traffic: Traffic) {
        let placement = match traffic {
            Traffic::ToDevice(_) | Traffic::Eviction(_) => Placement::Managed,
            Traffic::Fetch(_) | Traffic::Dropped | Traffic::WriteBack(_) => Placement::Streamed,
        };
        self.lock().now.apply(class, placement, |s| match traffic {
            Traffic::ToDevice(bytes) | Traffic::Fetch(bytes) => s.prefetched_to_device += bytes,
            Traffic::Eviction(bytes) => {
                s.prefetched_to_host += bytes;
                s.evictions += 1;
            }
            Traffic::Dropped => s.evictions += 1,
            Traffic::WriteBack(bytes) => s.prefetched_to_host += bytes,
        });
    }

    /// Records a pool trim.
    pub(crate) fn record_trim(&self) {
        self.lock().now.pool_trims += 1;
    }

    /// A snapshot of the counters.
    pub fn snapshot(&self) -> Statistics {
        self.lock().now.clone()
    }

    /// Opens a scope: peaks restart from the current values until the returned
    /// guard is finished or dropped, and are then merged back (as RMM's
    /// `push_counters`/`pop_counters`).
    pub fn scope(&self) -> StatisticsScope {
        let mut state = self.lock();
        let saved = state.now.clone();
        state.saved.push(saved);
        state.now.for_each_mut(ClassStatistics::restart_peak);
        StatisticsScope {
            handle: self.clone(),
            done: false,
        }
    }

    fn pop(&self) -> Statistics {
        let mut state = self.lock();
        let inside = state.now.clone();
        if let Some(saved) = state.saved.pop() {
            state.now.zip_mut(&saved, ClassStatistics::merge_peak);
        }
        inside
    }
}

/// A statistics scope opened by [`StatisticsHandle::scope`]. Its peaks cover
/// only what happened while it was open.
#[derive(Debug)]
pub struct StatisticsScope {
    handle: StatisticsHandle,
    done: bool,
}

impl StatisticsScope {
    /// Closes the scope and returns the counters as seen inside it.
    pub fn finish(mut self) -> Statistics {
        self.done = true;
        self.handle.pop()
    }
}

impl Drop for StatisticsScope {
    fn drop(&mut self) {
        if !self.done {
            self.handle.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_current_peak_total_and_scopes() {
        let h = StatisticsHandle::default();
        let (c, p) = (MemoryClass::Ciphertext, Placement::Host);
        let alloc = |bytes| Event::Alloc {
            bytes,
            sensitive: false,
        };
        let free = |bytes| Event::Free {
            bytes,
            sensitive: false,
        };
        h.record(c, p, alloc(100));
        h.record(
            c,
            p,
            Event::Alloc {
                bytes: 50,
                sensitive: true,
            },
        );
        h.record(c, p, free(100));
        let s = h.snapshot();
        assert_eq!(
            s.get(c, p).bytes,
            Counter {
                current: 50,
                peak: 150,
                total: 150
            }
        );
        assert_eq!(s.class(c).allocations, 2);
        assert_eq!(s.class(c).frees, 1);
        assert_eq!(s.class(c).sensitive_allocations, 1);
        assert_eq!(s.class(c).sensitive_frees, 0);
        assert_eq!(s.total().sensitive_allocations, 1);
        assert_eq!(s.class(MemoryClass::Temporary), ClassStatistics::default());

        let scope = h.scope();
        h.record(MemoryClass::Temporary, p, alloc(30));
        h.record(MemoryClass::Temporary, p, free(30));
        let inside = scope.finish();
        // Inside the scope the peak starts at the live 50 bytes.
        assert_eq!(inside.total().bytes.peak, 80);
        // Outside, the earlier peak of 150 survives the merge.
        assert_eq!(h.snapshot().total().bytes.peak, 150);
        assert_eq!(h.snapshot().class(MemoryClass::Temporary).bytes.peak, 30);

        let k = MemoryClass::EvaluationKey;
        h.record_traffic(k, Traffic::ToDevice(64));
        h.record_traffic(k, Traffic::Eviction(64));
        h.record_traffic(k, Traffic::ToDevice(64));
        h.record_trim();
        let s = h.snapshot();
        let cell = s.get(k, Placement::Managed);
        assert_eq!(cell.prefetched_to_device, 128);
        assert_eq!(cell.prefetched_to_host, 64);
        assert_eq!(cell.evictions, 1);
        assert_eq!(s.total().prefetched_to_device, 128);
        assert_eq!(s.placement(Placement::Managed).evictions, 1);
        assert_eq!(s.pool_trims(), 1);
    }
}
