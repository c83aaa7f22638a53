//! The `dynamic` policy: §III-D of the hybrid-UM paper.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use super::PlacementPolicy;
use crate::{AllocRequest, AllocationId, ConfigError, MemoryClass, Placement, Result};

/// Entries in each size's history.
pub const HISTORY: usize = 10;

#[derive(Debug, Default)]
struct SizeState {
    /// Live allocations of this size now.
    live: u64,
    /// Live counts seen at the last [`HISTORY`] allocations of this size.
    history: VecDeque<u64>,
    /// The last request decided, so a retried request gets the same answer.
    last: Option<(AllocationId, Placement)>,
}

/// The dynamic scheme (Choi et al., §III-D): for every allocation size, the
/// number of live allocations of that size is recorded at each allocation in
/// a history of the last 10. Until the history is full, allocations are
/// managed; then they are pooled while `max − min` of the history stays below
/// the threshold X (the size is being recycled at a steady rate: scratch), and
/// managed again when it rises (the size is accumulating: long-lived data).
#[derive(Debug)]
pub struct DynamicPolicy {
    threshold: u64,
    sizes: Mutex<HashMap<usize, SizeState>>,
}

impl DynamicPolicy {
    /// The default threshold X.
    pub const DEFAULT_THRESHOLD: u64 = 4;

    /// A dynamic policy with threshold `threshold` (X).
    ///
    /// # Errors
    /// [`ConfigError::ZeroThreshold`] for 0 (nothing would ever be pooled).
    pub fn new(threshold: u64) -> Result<Self> {
        if threshold == 0 {
            return Err(ConfigError::ZeroThreshold.into());
        }
        Ok(Self {
            threshold,
            sizes: Mutex::new(HashMap::new()),
        })
    }

    /// The threshold X.
    pub fn threshold(&self) -> u64 {
        self.threshold
    }
}

impl PlacementPolicy for DynamicPolicy {
    fn name(&self) -> &'static str {
        "dynamic"
    }

    fn place(&self, request: &AllocRequest) -> Result<Placement> {
        let mut sizes = self.sizes.lock().unwrap_or_else(PoisonError::into_inner);
        let state = sizes.entry(request.bytes).or_default();
        if let Some((id, placement)) = state.last
            && id == request.id
        {
            return Ok(placement);
        }
        if state.history.len() == HISTORY {
            state.history.pop_front();
        }
        state.history.push_back(state.live);
        let placement = if state.history.len() < HISTORY {
            Placement::Managed
        } else {
            let max = state.history.iter().copied().max().unwrap_or(0);
            let min = state.history.iter().copied().min().unwrap_or(0);
            if max - min < self.threshold {
                Placement::DevicePool
            } else {
                Placement::Managed
            }
        };
        state.last = Some((request.id, placement));
        Ok(placement)
    }

    fn allocated(&self, request: &AllocRequest, _placement: Placement) {
        let mut sizes = self.sizes.lock().unwrap_or_else(PoisonError::into_inner);
        sizes.entry(request.bytes).or_default().live += 1;
    }

    fn released(&self, _class: MemoryClass, bytes: usize, _placement: Placement) {
        let mut sizes = self.sizes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(state) = sizes.get_mut(&bytes) {
            state.live = state.live.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::request;

    #[test]
    fn recycled_sizes_go_to_the_pool_and_accumulating_ones_stay_managed() {
        let policy = DynamicPolicy::new(3).expect("valid");
        let class = MemoryClass::Temporary;
        let mut placements = Vec::new();
        // Size 4096 is allocated and freed at once, twelve times: live count 0.
        for id in 1..=12 {
            let r = request(id, class, 4096);
            let p = policy.place(&r).expect("placed");
            assert_eq!(policy.place(&r), Ok(p), "a retried request is stable");
            policy.allocated(&r, p);
            policy.released(class, 4096, p);
            placements.push(p);
        }
        let mut expected = vec![Placement::Managed; 9];
        expected.extend([Placement::DevicePool; 3]);
        assert_eq!(placements, expected);

        // Size 8192 accumulates: live counts 0, 1, 2, …: pooled while the
        // history's spread is below 3 (never once it is full: spread 9).
        let mut placements = Vec::new();
        for id in 100..112 {
            let r = request(id, class, 8192);
            let p = policy.place(&r).expect("placed");
            policy.allocated(&r, p);
            placements.push(p);
        }
        assert_eq!(placements, vec![Placement::Managed; 12]);
        // Free them all: the spread falls back below 3 after enough steady
        // allocations and the size is pooled again.
        for _ in 0..12 {
            policy.released(class, 8192, Placement::Managed);
        }
        let mut placements = Vec::new();
        for id in 200..212 {
            let r = request(id, class, 8192);
            let p = policy.place(&r).expect("placed");
            policy.allocated(&r, p);
            policy.released(class, 8192, p);
            placements.push(p);
        }
        let mut expected = vec![Placement::Managed; 9];
        expected.extend([Placement::DevicePool; 3]);
        assert_eq!(placements, expected);
    }

    #[test]
    fn zero_threshold_is_refused() {
        assert_eq!(
            DynamicPolicy::new(0).map(|_| ()),
            Err(ConfigError::ZeroThreshold.into())
        );
    }
}
