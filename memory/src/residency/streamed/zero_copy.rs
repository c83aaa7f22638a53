//! Zero-copy: kernels read a streamed object in place from its pinned
//! master, over PCIe, when no device room can be made for it (or, in the
//! [`ZeroCopy::Streaming`] mode, for every streaming object).

use std::sync::atomic::Ordering;

use super::super::Residency;
use super::super::state::State;
use super::StreamedEntry;
use crate::{AllocationId, Result};

/// When the `planned` policy lets kernels read a streamed object in place
/// from its pinned master (zero-copy) instead of a device copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ZeroCopy {
    /// Never: an object that cannot get device room is `OverBudget`.
    Off,
    /// Only when no device room can be made for an object an operation
    /// needs now (the default).
    #[default]
    Fallback,
    /// Also every object the look-ahead streams (not in its stable set),
    /// at every use: no copies, every read over PCIe. For measuring the
    /// placement against fetching.
    Streaming,
}

impl ZeroCopy {
    /// Every mode.
    pub const ALL: [Self; 3] = [Self::Off, Self::Fallback, Self::Streaming];

    /// The mode's name (`HEMEM_ZERO_COPY`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Fallback => "fallback",
            Self::Streaming => "streaming",
        }
    }
}

impl std::str::FromStr for ZeroCopy {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s.trim())
            .ok_or_else(|| {
                crate::ConfigError::InvalidSetting {
                    name: "HEMEM_ZERO_COPY",
                    value: s.to_owned(),
                }
                .into()
            })
    }
}

impl StreamedEntry {
    /// Forgets the in-place mapping of an object read from its master
    /// (work already queued keeps the address it was given).
    pub(super) fn unmap(&mut self) {
        self.zero_copy = false;
        self.device = None;
        self.slot.store(0, Ordering::Release);
    }
}

impl Residency {
    /// Whether `id` is read in place by choice: [`ZeroCopy::Streaming`],
    /// while the look-ahead follows a recording that streams it.
    pub(super) fn read_in_place(s: &State, id: AllocationId) -> bool {
        s.zero_copy == ZeroCopy::Streaming
            && s.planner.next_use(id).is_some()
            && !s.planner.is_stable(id)
    }

    /// Serves `id` in place from its pinned master for this use (zero-copy)
    /// when no device room can be made for it: the declared objects of one
    /// operation and the pool's fragmentation can leave a fetch for use no
    /// room although the budget's accounting has it (FVb at 2 GiB: 1.25 GB
    /// of key-switch temporaries beside a 78 MB key). Kernels then read the
    /// master over PCIe (the same bytes a copy would move, but only once
    /// the kernel runs and at the link's speed), and the object takes no
    /// device memory; at its next use it tries for a device copy again. The
    /// hybrid runtime's paper and GPUswap place cold data in host memory
    /// the same way. `Ok(false)` where the device cannot map host memory or
    /// the master holds no data yet.
    pub(super) fn zero_copy(&self, s: &mut State, id: AllocationId) -> Result<bool> {
        let Some(e) = s.streamed.entries.get_mut(&id) else {
            return Ok(false);
        };
        if !e.master_valid || !e.sealed || s.zero_copy == ZeroCopy::Off {
            return Ok(false);
        }
        let Some(mapped) = self.driver.map_master(e.master)? else {
            return Ok(false);
        };
        e.zero_copy = true;
        e.awaited = true;
        e.device = Some(mapped);
        e.slot.store(mapped.0, Ordering::Release);
        s.streamed.zero_copy_uses += 1;
        s.streamed.zero_copy_bytes = s.streamed.zero_copy_bytes.saturating_add(e.bytes);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::driver::mock::{Call, ZERO_COPY_BASE};
    use super::super::testing::{MIB, fetched, id, manager, object};
    use super::*;
    use crate::{MemoryClass, Placement};

    #[test]
    fn an_object_without_device_room_is_read_in_place_and_tries_again_next_time() {
        let (r, d, _) = manager(2 * MIB);
        object(&r, 1, MIB);
        let slot = object(&r, 2, 2 * MIB);
        let held = r.prepare(&[id(1)]).expect("fits");
        d.take();
        // Object 1 is held and 2 needs the whole budget: 2 is served from
        // its pinned master (address 2 in the mock), with no copy.
        let in_place = r.prepare(&[id(2)]).expect("zero-copy");
        assert_eq!(d.take(), vec![Call::ZeroCopy(2)]);
        assert_eq!(slot.load(Ordering::Acquire), ZERO_COPY_BASE | 2);
        let usage = r.usage();
        assert_eq!((usage.zero_copy_uses, usage.zero_copy_bytes), (1, 2 * MIB));
        assert_eq!(usage.streamed_resident, MIB, "{usage:?}");
        assert_eq!(
            r.in_use()
                .get(MemoryClass::EvaluationKey, Placement::Streamed),
            MIB
        );
        drop(in_place);
        drop(held);
        // Next use, with 1 free to leave: a device copy after all.
        drop(r.prepare(&[id(2)]).expect("fits once 1 may leave"));
        let calls = d.take();
        assert!(calls.contains(&Call::Fetch(2)), "{calls:?}");
        assert_ne!(slot.load(Ordering::Acquire), ZERO_COPY_BASE | 2);
        assert_eq!(r.usage().zero_copy_uses, 1);
        // Freeing an object read in place frees nothing on the device.
        let (r, d, _) = manager(2 * MIB);
        object(&r, 1, MIB);
        object(&r, 2, 2 * MIB);
        let held = r.prepare(&[id(1)]).expect("fits");
        drop(r.prepare(&[id(2)]).expect("zero-copy"));
        d.take();
        r.unregister_streamed(id(2));
        assert_eq!(d.take(), vec![]);
        drop(held);
    }

    #[test]
    fn in_streaming_zero_copy_mode_the_streamed_objects_are_read_in_place() {
        // The cycle of the test below, with streaming objects read in place
        // once the recording exists: the steady state copies nothing, the
        // stable set stays resident, and the rest is mapped at every use.
        let (r, d, _) = manager(32 * MIB);
        r.set_zero_copy(ZeroCopy::Streaming);
        for n in 1..=40 {
            object(&r, n, MIB);
        }
        for _ in 0..3 {
            r.begin_phase(42, 1);
            for n in 1..=40 {
                drop(r.prepare(&[id(n)]).expect("fits"));
            }
            r.end_phase();
        }
        d.take();
        r.begin_phase(42, 1);
        for n in 1..=40 {
            let g = r.prepare(&[id(n)]).expect("fits");
            let usage = r.usage();
            assert!(usage.device_bytes() <= 32 * MIB, "{usage:?}");
            drop(g);
        }
        r.end_phase();
        let calls = d.take();
        let fetched = fetched(&calls);
        let mapped = calls
            .iter()
            .filter(|c| matches!(c, Call::ZeroCopy(_)))
            .count();
        assert!(fetched.is_empty(), "{calls:?}");
        let stable = r.usage().stable_bytes / MIB;
        assert!(stable >= 20, "{:?}", r.usage());
        // The streaming ones still resident from the copying runs are used
        // where they are; every other is mapped.
        let streaming = 40 - stable;
        assert!(
            (streaming - 3..=streaming).contains(&(mapped as u64)),
            "{mapped} of {streaming}: {calls:?}"
        );
    }
}
