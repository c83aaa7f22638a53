//! Helpers shared by the streamed objects' unit tests (and the arena's):
//! a manager over the recording mock driver, and sealed objects in it.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::super::Residency;
use super::super::driver::mock::{Call, RecordingDriver};
use crate::statistics::StatisticsHandle;
use crate::{AllocationId, MemoryClass};

pub(super) const MIB: u64 = 1 << 20;

/// A manager whose streamed objects take a pool slot each (the arena's
/// placement has its own tests, in `arena`; the decisions here are the
/// same with it).
pub(super) fn manager(budget: u64) -> (Arc<Residency>, RecordingDriver, StatisticsHandle) {
    manager_with_arena(budget, false)
}

/// A manager with streamed objects in the arena (`arena`) or in a pool
/// slot each.
pub(in crate::residency) fn manager_with_arena(
    budget: u64,
    arena: bool,
) -> (Arc<Residency>, RecordingDriver, StatisticsHandle) {
    let (r, driver, stats) =
        super::super::testing::manager_with(budget, true, crate::Eviction::LeastRecentlyUsed);
    r.set_streaming_arena(arena);
    (r, driver, stats)
}

pub(super) fn id(n: u64) -> AllocationId {
    AllocationId(n)
}

/// Registers object `n` (master address `n`) and makes its master hold
/// data, as a loaded key's does, sealed.
pub(in crate::residency) fn object(r: &Residency, n: u64, bytes: u64) -> Arc<AtomicU64> {
    let slot = Arc::new(AtomicU64::new(0));
    r.register_streamed(
        id(n),
        MemoryClass::EvaluationKey,
        bytes,
        n,
        Arc::clone(&slot),
    );
    r.lock()
        .streamed
        .entries
        .get_mut(&id(n))
        .expect("registered")
        .master_valid = true;
    r.seal(id(n)).expect("sealed");
    slot
}

pub(super) fn fetched(calls: &[Call]) -> Vec<u64> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Fetch(n) => Some(*n),
            _ => None,
        })
        .collect()
}
