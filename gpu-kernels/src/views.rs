//! Typed device views of buffers: what launchers take.

use std::marker::PhantomData;

use hemem_memory::{Buffer, DevicePtr, Error as MemoryError, StreamId};

use crate::Result;

fn device_of(buffer: &Buffer) -> Result<(DevicePtr, StreamId)> {
    match (buffer.device_ptr(), buffer.stream()) {
        (Some(ptr), Some(stream)) => Ok((ptr, stream)),
        _ => Err(MemoryError::WrongPlacement {
            placement: buffer.placement(),
            wanted: "device",
        }
        .into()),
    }
}

/// Read-only device words of a buffer (pooled or managed), borrowed from it.
#[derive(Debug, Clone, Copy)]
pub struct DeviceWords<'a> {
    ptr: DevicePtr,
    words: usize,
    stream: StreamId,
    _buffer: PhantomData<&'a Buffer>,
}

impl<'a> DeviceWords<'a> {
    /// A view of all of `buffer`'s whole words.
    ///
    /// # Errors
    /// [`hemem_memory::Error::WrongPlacement`] for a host buffer.
    pub fn new(buffer: &'a Buffer) -> Result<Self> {
        let (ptr, stream) = device_of(buffer)?;
        Ok(Self {
            ptr,
            words: buffer.words(),
            stream,
            _buffer: PhantomData,
        })
    }

    /// The device address.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Words in the view.
    pub fn len(&self) -> usize {
        self.words
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.words == 0
    }

    /// The stream the buffer is ordered on.
    pub fn stream(&self) -> StreamId {
        self.stream
    }
}

/// Writable device words of a buffer, borrowed mutably from it.
#[derive(Debug)]
pub struct DeviceWordsMut<'a> {
    ptr: DevicePtr,
    words: usize,
    stream: StreamId,
    _buffer: PhantomData<&'a mut Buffer>,
}

impl<'a> DeviceWordsMut<'a> {
    /// A view of all of `buffer`'s whole words.
    ///
    /// # Errors
    /// [`hemem_memory::Error::WrongPlacement`] for a host buffer.
    pub fn new(buffer: &'a mut Buffer) -> Result<Self> {
        let (ptr, stream) = device_of(buffer)?;
        Ok(Self {
            ptr,
            words: buffer.words(),
            stream,
            _buffer: PhantomData,
        })
    }

    /// The device address.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Words in the view.
    pub fn len(&self) -> usize {
        self.words
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.words == 0
    }

    /// The stream the buffer is ordered on.
    pub fn stream(&self) -> StreamId {
        self.stream
    }
}
