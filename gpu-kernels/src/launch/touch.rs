//! Launchers of `cuda/touch.cu`: fill a buffer with the test pattern, count
//! the words that differ from it, read every word.

use cudarc::driver::PushKernelArg;
use hemem_memory::{Allocator, Buffer, MemoryClass, StreamId};

use super::{BLOCK, grid_stride};
use crate::{DeviceWords, DeviceWordsMut, Error, Result, TestKernels};

fn launched(kernel: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
    move |error| Error::Launch { kernel, error }
}

/// Queues `touch_fill` on `stream`: `dst[i] = pattern_word(seed, i)`.
/// Grid-stride, 256 threads per block, at most 4096 blocks; writes
/// `8 · dst.len()` bytes.
///
/// # Errors
/// [`Error::Launch`].
///
/// # Safety
/// `dst`'s memory must be usable on `stream` when the kernel runs: allocated
/// on it, or ordered before it with an event, and not freed before the kernel
/// completes in that order. No other queued work may access it concurrently.
pub unsafe fn fill_async(
    kernels: &TestKernels,
    stream: StreamId,
    dst: DeviceWordsMut<'_>,
    seed: u64,
) -> Result<()> {
    let stream = kernels.device.stream(stream);
    let (ptr, words) = (dst.ptr().addr(), dst.len() as u64);
    let mut launch = stream.launch_builder(&kernels.touch.fill);
    launch.arg(&ptr).arg(&words).arg(&seed);
    // SAFETY: the PTX signature is (u64*, u64, u64) and the arguments are a
    // device address and two u64 values; the caller guarantees the memory
    // is valid on this stream.
    unsafe { launch.launch(grid_stride(words, BLOCK)) }.map_err(launched("touch_fill"))?;
    Ok(())
}

/// Queues `touch_verify` on `stream`: adds to `counter[0]` the number of
/// words of `src` that differ from the pattern. Reads `8 · src.len()` bytes.
///
/// # Errors
/// [`Error::LaunchShape`] for an empty counter; [`Error::Launch`].
///
/// # Safety
/// As [`fill_async`], for both views; `counter` must not alias `src`.
pub unsafe fn verify_async(
    kernels: &TestKernels,
    stream: StreamId,
    src: DeviceWords<'_>,
    seed: u64,
    counter: DeviceWordsMut<'_>,
) -> Result<()> {
    if counter.is_empty() {
        return Err(Error::LaunchShape {
            kernel: "touch_verify",
            what: "counter words",
            expected: 1,
            found: 0,
        });
    }
    let stream = kernels.device.stream(stream);
    let (ptr, words, out) = (src.ptr().addr(), src.len() as u64, counter.ptr().addr());
    let mut launch = stream.launch_builder(&kernels.touch.verify);
    launch.arg(&ptr).arg(&words).arg(&seed).arg(&out);
    // SAFETY: PTX signature (const u64*, u64, u64, u64*); the caller
    // guarantees both ranges are valid on this stream and do not alias.
    unsafe { launch.launch(grid_stride(words, BLOCK)) }.map_err(launched("touch_verify"))?;
    Ok(())
}

/// Queues `touch_read` on `stream`: reads every word of `src` and XORs a
/// digest into `sink[0]`. Reads `8 · src.len()` bytes.
///
/// # Errors
/// [`Error::LaunchShape`] for an empty sink; [`Error::Launch`].
///
/// # Safety
/// As [`verify_async`].
pub unsafe fn read_async(
    kernels: &TestKernels,
    stream: StreamId,
    src: DeviceWords<'_>,
    sink: DeviceWordsMut<'_>,
) -> Result<()> {
    if sink.is_empty() {
        return Err(Error::LaunchShape {
            kernel: "touch_read",
            what: "sink words",
            expected: 1,
            found: 0,
        });
    }
    let stream = kernels.device.stream(stream);
    let (ptr, words, out) = (src.ptr().addr(), src.len() as u64, sink.ptr().addr());
    let mut launch = stream.launch_builder(&kernels.touch.read);
    launch.arg(&ptr).arg(&words).arg(&out);
    // SAFETY: PTX signature (const u64*, u64, u64*); as verify_async.
    unsafe { launch.launch(grid_stride(words, BLOCK)) }.map_err(launched("touch_read"))?;
    Ok(())
}

/// The stream of a device buffer, or the placement error.
fn stream_of(buffer: &Buffer) -> Result<StreamId> {
    Ok(DeviceWords::new(buffer)?.stream())
}

/// Fills `buffer` with the pattern of `seed`, on the buffer's own stream,
/// after declaring it to the allocator (so a managed buffer is resident).
///
/// # Errors
/// Placement, budget and launch errors.
pub fn fill(
    kernels: &TestKernels,
    allocator: &Allocator,
    buffer: &mut Buffer,
    seed: u64,
) -> Result<()> {
    let stream = stream_of(buffer)?;
    let _resident = allocator.prepare(&[buffer])?;
    let view = DeviceWordsMut::new(buffer)?;
    // SAFETY: the launch is on the buffer's own stream, so it runs after the
    // allocation and before the free; the &mut borrow excludes other users.
    unsafe { fill_async(kernels, stream, view, seed) }
}

/// Reads every word of `buffer` on its own stream (so its pages are used),
/// after declaring it.
///
/// # Errors
/// Placement, budget and launch errors.
pub fn read(kernels: &TestKernels, allocator: &Allocator, buffer: &Buffer) -> Result<()> {
    let stream = stream_of(buffer)?;
    let mut sink = allocator.allocate_on(MemoryClass::Temporary, 8, false, stream)?;
    allocator.zero(&mut sink)?;
    let _resident = allocator.prepare(&[buffer, &sink])?;
    let view = DeviceWords::new(buffer)?;
    let out = DeviceWordsMut::new(&mut sink)?;
    // SAFETY: both buffers are ordered on `stream`, where the kernel runs;
    // the sink is a separate allocation.
    unsafe { read_async(kernels, stream, view, out) }
}

/// Counts the words of `buffer` that differ from the pattern of `seed`,
/// computed on the buffer's stream; waits for the answer.
///
/// # Errors
/// Placement, budget, launch and transfer errors.
pub fn count_mismatches(
    kernels: &TestKernels,
    allocator: &Allocator,
    buffer: &Buffer,
    seed: u64,
) -> Result<u64> {
    let stream = stream_of(buffer)?;
    let mut counter = allocator.allocate_on(MemoryClass::Temporary, 8, false, stream)?;
    allocator.zero(&mut counter)?;
    {
        let _resident = allocator.prepare(&[buffer, &counter])?;
        let view = DeviceWords::new(buffer)?;
        let out = DeviceWordsMut::new(&mut counter)?;
        // SAFETY: both buffers are ordered on `stream`, where the kernel
        // runs; the counter is a separate allocation.
        unsafe { verify_async(kernels, stream, view, seed, out) }?;
    }
    let mut count = [0u64];
    allocator.download(&counter, 0, &mut count)?;
    let [count] = count;
    Ok(count)
}
