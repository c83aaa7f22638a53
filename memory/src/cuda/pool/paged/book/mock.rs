//! A driver that records the book's calls.

use std::cell::{Cell, RefCell};

use super::PageDriver;
use crate::{Result, StreamId};

/// A call, addresses in pages of 1 byte (the tests use `page = 1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Call {
    Create(u64),
    Release(u32),
    Map { va: u64, handle: u32, offset: u64 },
    Grant(u64, u64),
    Unmap(u64),
    Record(StreamId, u32),
    Synchronize(u32),
    Wait(StreamId, u32),
}

/// An event: its number and whether the device has passed it.
#[derive(Debug)]
pub(crate) struct MockEvent {
    pub(crate) number: u32,
    pub(crate) done: Cell<bool>,
}

#[derive(Debug, Default)]
pub(crate) struct MockPages {
    pub(crate) calls: RefCell<Vec<Call>>,
    /// Physical pages the device has left (`None`: unlimited).
    pub(crate) device_room: Cell<Option<u64>>,
    /// Whether the device has passed every recorded event.
    pub(crate) events_done: Cell<bool>,
    next: Cell<u32>,
}

impl MockPages {
    pub(crate) fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.borrow_mut())
    }

    fn push(&self, call: Call) {
        self.calls.borrow_mut().push(call);
    }

    fn bump(&self) -> u32 {
        let n = self.next.get();
        self.next.set(n + 1);
        n
    }
}

impl PageDriver for MockPages {
    type Handle = u32;
    type Event = MockEvent;

    fn create(&self, bytes: u64) -> Result<Option<u32>> {
        if let Some(room) = self.device_room.get() {
            if room < bytes {
                return Ok(None);
            }
            self.device_room.set(Some(room - bytes));
        }
        self.push(Call::Create(bytes));
        Ok(Some(self.bump()))
    }

    fn release(&self, handle: u32) -> Result<()> {
        self.push(Call::Release(handle));
        Ok(())
    }

    fn map(&self, va: u64, handle: u32, offset: u64, _bytes: u64) -> Result<()> {
        self.push(Call::Map { va, handle, offset });
        Ok(())
    }

    fn grant(&self, va: u64, bytes: u64) -> Result<()> {
        self.push(Call::Grant(va, bytes));
        Ok(())
    }

    fn unmap(&self, va: u64, _bytes: u64) -> Result<()> {
        self.push(Call::Unmap(va));
        Ok(())
    }

    fn record(&self, stream: StreamId) -> Result<MockEvent> {
        let number = self.bump();
        self.push(Call::Record(stream, number));
        Ok(MockEvent {
            number,
            done: Cell::new(self.events_done.get()),
        })
    }

    /// Done when synchronised, or once the device has caught up
    /// (`events_done`: every point recorded so far is passed).
    fn is_complete(&self, event: &MockEvent) -> Result<bool> {
        Ok(event.done.get() || self.events_done.get())
    }

    fn synchronize(&self, event: &MockEvent) -> Result<()> {
        self.push(Call::Synchronize(event.number));
        event.done.set(true);
        Ok(())
    }

    fn wait(&self, stream: StreamId, event: &MockEvent) -> Result<()> {
        self.push(Call::Wait(stream, event.number));
        Ok(())
    }
}
