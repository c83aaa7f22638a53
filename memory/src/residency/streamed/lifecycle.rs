//! A streamed object's life: registration with an empty master, writes to
//! its device copy or its master, sealing, the end of each use, and
//! unregistration when it is freed.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::super::Residency;
use super::super::eviction::Uses;
use super::StreamedEntry;
use crate::statistics::Traffic;
use crate::{AllocationId, MemoryClass, Result};

impl Residency {
    /// Starts tracking a streamed object (not resident; its master holds
    /// nothing yet).
    pub(crate) fn register_streamed(
        &self,
        id: AllocationId,
        class: MemoryClass,
        bytes: u64,
        master: u64,
        slot: Arc<AtomicU64>,
    ) {
        let mut s = self.lock();
        s.streamed.entries.insert(
            id,
            StreamedEntry {
                class,
                bytes,
                master,
                slot,
                device: None,
                master_valid: false,
                sealed: false,
                dirty: false,
                awaited: true,
                in_arena: false,
                zero_copy: false,
                last_use: None,
                pins: 0,
                uses: Uses::default(),
            },
        );
    }

    /// Stops tracking a streamed object that is being freed: its slot is
    /// freed after the work queued so far, and the compute stream is ordered
    /// after its last fetch (its master may be handed out again).
    pub(crate) fn unregister_streamed(&self, id: AllocationId) {
        let mut s = self.lock();
        let Some(entry) = s.streamed.entries.remove(&id) else {
            return;
        };
        if entry.zero_copy {
            return;
        }
        if let Some(slot) = entry.device {
            let awaited = if entry.awaited {
                Ok(())
            } else {
                self.driver.await_fetch(id)
            };
            let result = awaited.and_then(|()| self.driver.begin());
            if entry.in_arena {
                // The range is reused only by copies queued after `begin`;
                // if that failed, it is not reused at all.
                self.driver.forget_fetch(id);
                if result.is_ok() {
                    s.streamed.arena.release(slot, entry.bytes);
                }
            } else {
                if result.is_ok() {
                    self.driver.free_slot(id, slot, entry.bytes);
                }
                s.pool_used = s.pool_used.saturating_sub(entry.bytes);
                s.streamed.outside = s.streamed.outside.saturating_sub(entry.bytes);
            }
            s.streamed.resident = s.streamed.resident.saturating_sub(entry.bytes);
        }
    }

    /// Declares that a streamed object will not be written again: from now
    /// on evicting it writes nothing back. A resident copy newer than the
    /// master is copied back now, on the copy stream (a key just made on the
    /// device), so that no later eviction waits for it.
    ///
    /// # Errors
    /// Driver errors of that copy.
    pub fn seal(&self, id: AllocationId) -> Result<()> {
        let mut s = self.lock();
        let Some(e) = s.streamed.entries.get_mut(&id) else {
            return Ok(());
        };
        e.sealed = true;
        if e.zero_copy {
            return Ok(());
        }
        if let (Some(slot), true) = (e.device, e.dirty) {
            self.driver.write_back_async(e.master, slot, e.bytes)?;
            e.master_valid = true;
            e.dirty = false;
            self.statistics
                .record_traffic(e.class, Traffic::WriteBack(e.bytes));
        }
        Ok(())
    }

    /// Records that a streamed object's device copy was written (an upload
    /// or a copy into it): it is written back before its slot is freed.
    pub(crate) fn written(&self, id: AllocationId) {
        if let Some(e) = self.lock().streamed.entries.get_mut(&id) {
            e.dirty = e.device.is_some() && !e.zero_copy;
        }
    }

    /// Records that words were written into a streamed object's master
    /// (an upload): it holds the object's data from now on. Returns whether
    /// the object is resident (its device copy needs the words too).
    pub(crate) fn master_written(&self, id: AllocationId) -> bool {
        match self.lock().streamed.entries.get_mut(&id) {
            Some(e) => {
                e.master_valid = true;
                e.device.is_some() && !e.zero_copy
            }
            None => false,
        }
    }

    /// Ends an operation's claim on `ids` (its [`ResidencyGuard`](crate::residency::ResidencyGuard)
    /// drops once its kernels are queued): the streamed objects among them
    /// get a use mark, which their eviction waits for.
    pub(in crate::residency) fn end_use(&self, ids: &[AllocationId]) {
        let mut s = self.lock();
        super::super::guard::unpin(&mut s, ids);
        if !ids.iter().any(|id| s.streamed.entries.contains_key(id)) {
            return;
        }
        // Without a mark, an eviction waits for all compute work instead.
        let mark = self.driver.mark_use().unwrap_or(u64::MAX);
        for id in ids {
            if let Some(e) = s.streamed.entries.get_mut(id) {
                e.last_use = Some(mark);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::driver::mock::Call;
    use super::super::testing::{MIB, id, manager};
    use super::*;

    #[test]
    fn an_unsealed_object_is_written_back_once_and_then_fetched_from_its_master() {
        let (r, d, _) = manager(MIB);
        for n in 1..=2 {
            r.register_streamed(
                id(n),
                MemoryClass::EvaluationKey,
                MIB,
                n,
                Arc::new(AtomicU64::new(0)),
            );
        }
        // A fresh object's master holds nothing: no copy, only a slot.
        drop(r.prepare(&[id(1)]).expect("fits"));
        assert_eq!(d.take(), vec![Call::Slot(1)]);
        drop(r.prepare(&[id(2)]).expect("evicts 1"));
        assert_eq!(
            d.take(),
            vec![
                Call::WriteBack(1),
                Call::WaitUse(0),
                Call::FreeSlot(1),
                Call::Slot(2)
            ]
        );
        // 2 was written before it was sealed: sealing copies it back at once,
        // on the copy stream; its eviction then writes nothing, and 1 comes
        // back from its master.
        r.seal(id(2)).expect("sealed");
        assert_eq!(d.take(), vec![Call::WriteBackAsync(2)]);
        r.seal(id(1)).expect("sealed");
        assert_eq!(d.take(), vec![], "1 is not resident: nothing to copy");
        drop(r.prepare(&[id(1)]).expect("evicts 2"));
        assert_eq!(
            d.take(),
            vec![
                Call::WaitUse(1),
                Call::FreeSlot(2),
                Call::Slot(1),
                Call::Fetch(1),
                Call::Await(1)
            ]
        );
        drop(r.prepare(&[id(2)]).expect("evicts 1"));
        let calls = d.take();
        assert!(
            !calls.iter().any(|c| matches!(c, Call::WriteBack(_))),
            "{calls:?}"
        );
    }
}
