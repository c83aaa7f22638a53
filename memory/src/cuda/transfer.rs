//! Host↔device transfers, device copies and zeroing, each ordered on the
//! stream of the buffer it writes.
//!
//! Uploads go through a small pinned staging ring: the caller's words are
//! copied into a pinned slot and the DMA is queued from there, so an upload
//! returns as soon as the caller's slice has been read (never waiting for the
//! device), and the slot is reused only after the event behind its last copy.
//! An upload into a *sensitive* buffer (secret-key material) waits instead
//! for its copies and then zeroes the staging words it used, so no secret
//! stays behind in pinned memory. Downloads go straight into the caller's
//! slice (no staging) and synchronise the buffer's stream before returning.
//! Nothing here synchronises the whole device.

use std::ffi::c_void;
use std::sync::PoisonError;

use cudarc::driver::CudaEvent;
use cudarc::driver::sys;
use zeroize::Zeroize;

use super::GpuDevice;
use super::pinned::PinnedRegion;
use crate::error::driver;
use crate::{Buffer, DeviceMemory, DevicePtr, Error, Placement, Result, StreamId};

/// Words per staging slot (8 MiB).
const SLOT_WORDS: usize = 1 << 20;
/// Slots in the ring: one filling while the other is in flight.
const SLOTS: usize = 2;

struct Slot {
    region: PinnedRegion,
    /// Recorded behind the last copy out of this slot.
    last_copy: Option<CudaEvent>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // The region must outlive the DMA reading it.
        if let Some(event) = self.last_copy.take() {
            let _ = event.synchronize();
        }
    }
}

/// The pinned staging ring of a device, made on the first upload.
pub(crate) struct Staging {
    slots: Vec<Slot>,
    next: usize,
}

/// Waits for the copies out of the staging slots an upload used and zeroes
/// the words it wrote there (`used[i]` words of slot `i`): after a sensitive
/// upload no secret stays in pinned memory.
///
/// # Errors
/// [`Error::ZeroingFailed`] when a copy cannot be waited for (the slot's
/// words are then left for the next upload to overwrite, and the slot is
/// not zeroed under a DMA that may still read it).
fn wipe_staging(staging: &mut Staging, used: &[usize; SLOTS]) -> Result<()> {
    for (slot, &words) in staging.slots.iter_mut().zip(used) {
        if words == 0 {
            continue;
        }
        // The event stays with the slot until it has completed.
        if let Some(event) = &slot.last_copy {
            event.synchronize().map_err(|e| Error::ZeroingFailed {
                placement: Placement::PinnedHost,
                bytes: words * 8,
                cause: Box::new(driver("cuEventSynchronize")(e)),
            })?;
        }
        slot.last_copy = None;
        if let Some(written) = slot.region.as_mut_slice().get_mut(..words) {
            written.zeroize();
        }
    }
    Ok(())
}

/// The device memory of a buffer, or `WrongPlacement`.
fn device_memory(buffer: &Buffer) -> Result<DeviceMemory> {
    buffer.memory().device().ok_or(Error::WrongPlacement {
        placement: buffer.placement(),
        wanted: "device",
    })
}

/// Checks that `words` words at word `offset` fit a buffer of `buffer_words`.
fn check_bounds(offset: usize, words: usize, buffer_words: usize) -> Result<()> {
    match offset.checked_add(words) {
        Some(end) if end <= buffer_words => Ok(()),
        _ => Err(Error::TransferOutOfBounds {
            offset,
            words,
            buffer_words,
        }),
    }
}

fn byte_offset(ptr: DevicePtr, words: usize) -> DevicePtr {
    ptr.offset(words as u64 * 8)
}

impl GpuDevice {
    /// Copies `src` into words `offset..offset + src.len()` of a device
    /// buffer, queued on the buffer's stream through the staging ring.
    /// Returns once `src` has been read; the copy completes in stream order.
    /// For a sensitive buffer it returns once the copies are done and the
    /// staging words they used are zeroed.
    ///
    /// # Errors
    /// [`Error::WrongPlacement`] for a host buffer,
    /// [`Error::TransferOutOfBounds`], driver errors;
    /// [`Error::ZeroingFailed`] when the staging of a sensitive upload could
    /// not be waited for and zeroed.
    pub(crate) fn upload(&self, dst: &mut Buffer, offset: usize, src: &[u64]) -> Result<()> {
        let memory = device_memory(dst)?;
        check_bounds(offset, src.len(), dst.words())?;
        if src.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let stream = self.stream(memory.stream);
        let mut guard = self
            .inner
            .staging
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if guard.is_none() {
            let slots = (0..SLOTS)
                .map(|_| {
                    Ok(Slot {
                        region: PinnedRegion::new(self.context(), SLOT_WORDS)?,
                        last_copy: None,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            *guard = Some(Staging { slots, next: 0 });
        }
        let Some(staging) = guard.as_mut() else {
            return Ok(());
        };
        let mut done = 0usize;
        // Words of each slot this upload filled (zeroed after a sensitive one).
        let mut used = [0usize; SLOTS];
        for chunk in src.chunks(SLOT_WORDS) {
            let index = staging.next;
            staging.next = (staging.next + 1) % SLOTS;
            let Some(slot) = staging.slots.get_mut(index) else {
                break;
            };
            if let Some(event) = slot.last_copy.take() {
                event.synchronize().map_err(driver("cuEventSynchronize"))?;
            }
            let words = slot.region.as_mut_slice();
            let Some(target) = words.get_mut(..chunk.len()) else {
                break;
            };
            target.copy_from_slice(chunk);
            if let Some(u) = used.get_mut(index) {
                *u = (*u).max(chunk.len());
            }
            let dst_ptr = byte_offset(memory.ptr, offset + done);
            // SAFETY: dst_ptr .. + chunk.len()*8 lies inside the buffer (bounds
            // checked above), which is freed only in order on this stream,
            // after this copy. The source is the pinned slot, which is not
            // touched again until the event recorded below completes.
            unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    dst_ptr.0,
                    slot.region.addr(0) as *const c_void,
                    chunk.len() * 8,
                    stream.cu_stream(),
                )
            }
            .result()
            .map_err(driver("cuMemcpyHtoDAsync"))?;
            slot.last_copy = Some(stream.record_event(None).map_err(driver("cuEventRecord"))?);
            done += chunk.len();
        }
        if dst.is_sensitive() {
            wipe_staging(staging, &used)?;
        }
        Ok(())
    }

    /// A copy of the staging ring's words once its copies are done (`None`
    /// before the first upload made it): what the GPU tests search for a
    /// secret after a sensitive upload.
    ///
    /// # Errors
    /// Driver errors of waiting for the ring's copies.
    #[cfg(feature = "test-utils")]
    pub(crate) fn staging_words(&self) -> Result<Option<Vec<u64>>> {
        let mut guard = self
            .inner
            .staging
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(staging) = guard.as_mut() else {
            return Ok(None);
        };
        let mut words = Vec::new();
        for slot in &mut staging.slots {
            if let Some(event) = &slot.last_copy {
                event.synchronize().map_err(driver("cuEventSynchronize"))?;
            }
            slot.last_copy = None;
            words.extend_from_slice(slot.region.as_mut_slice());
        }
        Ok(Some(words))
    }
    /// Queues a copy of `bytes` from pinned host memory at `host` to device
    /// memory at `device` on `stream` (a streamed object's fetch). Returns at
    /// once.
    ///
    /// The caller keeps the pinned memory alive and unchanged, and the device
    /// memory allocated, until the copy completes in stream order.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn copy_to_device_async(
        &self,
        device: DevicePtr,
        host: u64,
        bytes: u64,
        stream: StreamId,
    ) -> Result<()> {
        self.bind()?;
        let stream = self.stream(stream);
        // SAFETY: the residency manager passes a live slot of `bytes` bytes
        // and the pinned master of the same object, which outlives the copy
        // (a master is released only after its slot, whose free is ordered
        // after this copy on the same stream).
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                device.0,
                host as *const c_void,
                usize::try_from(bytes).unwrap_or(usize::MAX),
                stream.cu_stream(),
            )
        }
        .result()
        .map_err(driver("cuMemcpyHtoDAsync"))
    }

    /// The device address of pinned host memory at `host` (allocated with
    /// `CU_MEMHOSTALLOC_DEVICEMAP`, as the pinned arena's regions are):
    /// kernels read it there over PCIe, with no copy (zero-copy; GPUswap
    /// extends device memory with host RAM the same way).
    ///
    /// # Errors
    /// Driver errors (memory not mapped for the device).
    pub(crate) fn mapped_host(&self, host: u64) -> Result<DevicePtr> {
        self.bind()?;
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` lies in a live cuMemHostAlloc region (the caller's
        // pinned master); the call only writes the out-parameter.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host as *mut c_void, 0) }
            .result()
            .map_err(driver("cuMemHostGetDevicePointer"))?;
        Ok(DevicePtr(device))
    }

    /// Queues a copy of `bytes` from device memory at `device` to pinned host
    /// memory at `host` on `stream`. Returns at once; the caller keeps both
    /// alive, and reads the host memory only after the copy completes in
    /// stream order.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn copy_to_host_async(
        &self,
        host: u64,
        device: DevicePtr,
        bytes: u64,
        stream: StreamId,
    ) -> Result<()> {
        self.bind()?;
        let stream = self.stream(stream);
        // SAFETY: the residency manager passes a live slot and the pinned
        // master of the same object, of `bytes` bytes each; the slot is
        // freed, and the master read by a fetch, only in order after this
        // copy on the same stream.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                host as *mut c_void,
                device.0,
                usize::try_from(bytes).unwrap_or(usize::MAX),
                stream.cu_stream(),
            )
        }
        .result()
        .map_err(driver("cuMemcpyDtoHAsync"))
    }

    /// Copies `bytes` from device memory at `device` to pinned host memory at
    /// `host`, after the work queued on `stream`, and waits for it.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn copy_to_host_sync(
        &self,
        host: u64,
        device: DevicePtr,
        bytes: u64,
        stream: StreamId,
    ) -> Result<()> {
        self.copy_to_host_async(host, device, bytes, stream)?;
        self.synchronize(stream)
    }

    /// Copies words `offset..offset + dst.len()` of a device buffer into
    /// `dst`, on the buffer's stream, and waits for that stream.
    ///
    /// # Errors
    /// [`Error::WrongPlacement`] for a host buffer,
    /// [`Error::TransferOutOfBounds`], driver errors (including those of
    /// earlier work on the stream).
    pub(crate) fn download(&self, src: &Buffer, offset: usize, dst: &mut [u64]) -> Result<()> {
        let memory = device_memory(src)?;
        check_bounds(offset, dst.len(), src.words())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let stream = self.stream(memory.stream);
        let src_ptr = byte_offset(memory.ptr, offset);
        // SAFETY: the source range lies inside the live buffer (checked); dst
        // is an exclusive borrow of exactly dst.len()*8 bytes that lasts until
        // the stream synchronisation below, after which the copy is complete.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                dst.as_mut_ptr().cast::<c_void>(),
                src_ptr.0,
                dst.len() * 8,
                stream.cu_stream(),
            )
        }
        .result()
        .map_err(driver("cuMemcpyDtoHAsync"))?;
        stream.synchronize().map_err(driver("cuStreamSynchronize"))
    }

    /// Copies `words` words from `src` at `src_offset` to `dst` at
    /// `dst_offset` (both device buffers), queued on `dst`'s stream. When the
    /// buffers live on different streams, the copy waits for `src`'s stream
    /// and `src`'s stream then waits for the copy, so neither buffer is freed
    /// under it.
    ///
    /// # Errors
    /// [`Error::WrongPlacement`], [`Error::TransferOutOfBounds`], driver errors.
    pub(crate) fn copy(
        &self,
        src: &Buffer,
        src_offset: usize,
        dst: &mut Buffer,
        dst_offset: usize,
        words: usize,
    ) -> Result<()> {
        let from = device_memory(src)?;
        let to = device_memory(dst)?;
        check_bounds(src_offset, words, src.words())?;
        check_bounds(dst_offset, words, dst.words())?;
        if words == 0 {
            return Ok(());
        }
        self.bind()?;
        self.order(from.stream, to.stream)?;
        let stream = self.stream(to.stream);
        // SAFETY: both ranges lie inside live buffers (checked); the copy is
        // queued on dst's stream, after src's stream's earlier work, and src's
        // stream is ordered after it below, so neither is freed under it. With
        // unified addressing cuMemcpyAsync handles pool and managed memory.
        unsafe {
            sys::cuMemcpyAsync(
                byte_offset(to.ptr, dst_offset).0,
                byte_offset(from.ptr, src_offset).0,
                words * 8,
                stream.cu_stream(),
            )
        }
        .result()
        .map_err(driver("cuMemcpyAsync"))?;
        self.order(to.stream, from.stream)
    }

    /// Zeroes a whole device buffer, queued on its stream.
    ///
    /// # Errors
    /// [`Error::WrongPlacement`], driver errors.
    pub(crate) fn zero(&self, dst: &mut Buffer) -> Result<()> {
        let memory = device_memory(dst)?;
        self.zero_memory(memory, dst.bytes())
    }

    /// Zeroes `bytes` of device memory on its stream (`cuMemsetD8Async`):
    /// used before freeing sensitive managed memory.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn zero_memory(&self, memory: DeviceMemory, bytes: usize) -> Result<()> {
        self.bind()?;
        let stream = self.stream(memory.stream);
        // SAFETY: memory is a live allocation of at least `bytes` bytes whose
        // free is ordered after this memset (same stream, or events).
        unsafe { sys::cuMemsetD8Async(memory.ptr.0, 0, bytes, stream.cu_stream()) }
            .result()
            .map_err(driver("cuMemsetD8Async"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert!(check_bounds(0, 4, 4).is_ok());
        assert!(check_bounds(2, 2, 4).is_ok());
        assert_eq!(
            check_bounds(3, 2, 4),
            Err(Error::TransferOutOfBounds {
                offset: 3,
                words: 2,
                buffer_words: 4
            })
        );
        assert!(check_bounds(usize::MAX, 2, 4).is_err());
    }
}
