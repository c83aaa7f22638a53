//! Helpers shared by the residency manager's unit tests: a manager over
//! the recording mock driver, and managed buffers registered in it.

use std::sync::Arc;

use super::driver::mock::RecordingDriver;
use super::{Eviction, Residency};
use crate::policy::Advice;
use crate::statistics::StatisticsHandle;
use crate::{AllocationId, DevicePtr, MemoryClass};

pub(super) const MIB: u64 = 1 << 20;

pub(super) fn manager(
    budget: u64,
    prefetch: bool,
) -> (Arc<Residency>, RecordingDriver, StatisticsHandle) {
    manager_with(budget, prefetch, Eviction::default())
}

pub(in crate::residency) fn manager_with(
    budget: u64,
    prefetch: bool,
    eviction: Eviction,
) -> (Arc<Residency>, RecordingDriver, StatisticsHandle) {
    let driver = RecordingDriver::default();
    let stats = StatisticsHandle::default();
    let r = Arc::new(Residency::new(
        budget,
        prefetch,
        eviction,
        Box::new(driver.clone()),
        stats.clone(),
    ));
    (r, driver, stats)
}

pub(super) fn id(n: u64) -> AllocationId {
    AllocationId(n)
}

pub(super) fn register(r: &Residency, n: u64, class: MemoryClass, bytes: u64) {
    let advice = Advice::for_class(class);
    r.register_managed(id(n), class, DevicePtr(n << 32), bytes, advice);
}
