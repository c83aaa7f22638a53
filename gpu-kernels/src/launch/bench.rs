//! Launchers of `cuda/bench.cu`: the allocation micro-benchmark's random
//! addition and 8-point butterfly over randomly permuted 4 KiB chunks.

use std::marker::PhantomData;

use cudarc::driver::{LaunchConfig, PushKernelArg};
use hemem_memory::{Allocator, Buffer, MemoryClass, StreamId};

use crate::{DeviceWords, Error, Result, TestKernels, permutation};

/// Words per chunk (4 KiB).
pub const CHUNK_WORDS: usize = 512;
/// Threads per block: four words of a chunk each.
const BLOCK: u32 = 128;
/// Most blocks of a launch (grid-stride over pairs or groups).
const MAX_BLOCKS: u64 = 65_535;

fn launched(kernel: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
    move |error| Error::Launch { kernel, error }
}

fn one_block_per(items: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (u32::try_from(items.clamp(1, MAX_BLOCKS)).unwrap_or(1), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Queues `bench_chunk_add` on `stream`: for each pair `p < pairs`, the chunk
/// at `table[2p]` += the chunk at `table[2p + 1]`. One block of 128 threads
/// per pair (at most 65535 blocks, grid-stride); moves 3 × 4 KiB per pair.
///
/// # Errors
/// [`Error::LaunchShape`] when `table` has fewer than `2 · pairs` words;
/// [`Error::Launch`].
///
/// # Safety
/// Every address in the first `2 · pairs` words of `table` must be the start
/// of 4 KiB of device memory valid on `stream` while the kernel runs, the
/// written chunks (even positions) distinct from each other and from the read
/// ones, and `table` itself valid on `stream`.
pub unsafe fn chunk_add_async(
    kernels: &TestKernels,
    stream: StreamId,
    table: DeviceWords<'_>,
    pairs: u64,
) -> Result<()> {
    let needed = usize::try_from(pairs.saturating_mul(2)).unwrap_or(usize::MAX);
    if table.len() < needed {
        return Err(Error::LaunchShape {
            kernel: "bench_chunk_add",
            what: "table words",
            expected: needed,
            found: table.len(),
        });
    }
    let stream = kernels.device.stream(stream);
    let ptr = table.ptr().addr();
    let mut launch = stream.launch_builder(&kernels.bench.chunk_add);
    launch.arg(&ptr).arg(&pairs);
    // SAFETY: PTX signature (const u64*, u64); the caller guarantees the
    // table's addresses and the table are valid on this stream.
    unsafe { launch.launch(one_block_per(pairs)) }.map_err(launched("bench_chunk_add"))?;
    Ok(())
}

/// Queues `bench_chunk_butterfly8` on `stream`: for each group `g < groups`,
/// an in-place 8-point butterfly across the chunks at `table[8g .. 8g + 8]`.
/// One block of 128 threads per group; moves 16 × 4 KiB per group.
///
/// # Errors
/// [`Error::LaunchShape`] when `table` has fewer than `8 · groups` words;
/// [`Error::Launch`].
///
/// # Safety
/// As [`chunk_add_async`], with all chunks of the first `8 · groups` table
/// words distinct.
pub unsafe fn butterfly8_async(
    kernels: &TestKernels,
    stream: StreamId,
    table: DeviceWords<'_>,
    groups: u64,
) -> Result<()> {
    let needed = usize::try_from(groups.saturating_mul(8)).unwrap_or(usize::MAX);
    if table.len() < needed {
        return Err(Error::LaunchShape {
            kernel: "bench_chunk_butterfly8",
            what: "table words",
            expected: needed,
            found: table.len(),
        });
    }
    let stream = kernels.device.stream(stream);
    let ptr = table.ptr().addr();
    let mut launch = stream.launch_builder(&kernels.bench.butterfly8);
    launch.arg(&ptr).arg(&groups);
    // SAFETY: PTX signature (const u64*, u64); as chunk_add_async.
    unsafe { launch.launch(one_block_per(groups)) }.map_err(launched("bench_chunk_butterfly8"))?;
    Ok(())
}

/// The addresses of every whole 4 KiB chunk of some device buffers, in a
/// random order, uploaded to a device buffer: what both benchmark kernels
/// walk. It borrows the buffers mutably, so they outlive it and nothing else
/// touches them; all must be ordered on the compute stream, where the
/// kernels run.
#[derive(Debug)]
pub struct ChunkTable<'a> {
    table: Buffer,
    chunks: usize,
    buffers: Vec<&'a Buffer>,
    _exclusive: PhantomData<&'a mut Buffer>,
}

impl<'a> ChunkTable<'a> {
    /// Lists the chunks of `buffers`, shuffles them with `seed` and uploads
    /// the table (a `Temporary` buffer on the compute stream).
    ///
    /// # Errors
    /// [`Error::WrongStream`] for a buffer not on the compute stream;
    /// placement, allocation and transfer errors.
    pub fn new(allocator: &Allocator, buffers: &'a mut [Buffer], seed: u64) -> Result<Self> {
        let mut addresses = Vec::new();
        for buffer in buffers.iter() {
            let view = DeviceWords::new(buffer)?;
            if view.stream() != StreamId::Compute {
                return Err(Error::WrongStream {
                    kernel: "bench",
                    expected: StreamId::Compute,
                    found: view.stream(),
                });
            }
            let base = view.ptr();
            for chunk in 0..view.len() / CHUNK_WORDS {
                addresses.push(base.offset((chunk * CHUNK_WORDS * 8) as u64).addr());
            }
        }
        let order = permutation(addresses.len(), seed);
        let shuffled: Vec<u64> = order
            .iter()
            .filter_map(|&i| addresses.get(i).copied())
            .collect();
        let bytes = shuffled.len().max(1) * 8;
        let mut table =
            allocator.allocate_on(MemoryClass::Temporary, bytes, false, StreamId::Compute)?;
        allocator.upload(&mut table, 0, &shuffled)?;
        Ok(Self {
            table,
            chunks: shuffled.len(),
            buffers: buffers.iter().collect(),
            _exclusive: PhantomData,
        })
    }

    /// Chunks in the table.
    pub fn chunks(&self) -> usize {
        self.chunks
    }

    /// The buffers whose chunks are listed (to declare them with
    /// `Allocator::prepare` before a launch).
    pub fn buffers(&self) -> Vec<&Buffer> {
        let mut all = self.buffers.clone();
        all.push(&self.table);
        all
    }

    /// Queues the random addition over the table's chunk pairs on the
    /// compute stream (declare [`ChunkTable::buffers`] first).
    ///
    /// # Errors
    /// [`Error::Launch`].
    pub fn add(&mut self, kernels: &TestKernels) -> Result<()> {
        let pairs = (self.chunks / 2) as u64;
        let table = DeviceWords::new(&self.table)?;
        // SAFETY: every table entry is a distinct 4 KiB chunk of a buffer
        // borrowed mutably for 'a, all ordered on the compute stream where the
        // kernel runs; the table is too.
        unsafe { chunk_add_async(kernels, StreamId::Compute, table, pairs) }
    }

    /// Queues the 8-point butterfly over the table's chunk groups on the
    /// compute stream (declare [`ChunkTable::buffers`] first).
    ///
    /// # Errors
    /// [`Error::Launch`].
    pub fn butterfly8(&mut self, kernels: &TestKernels) -> Result<()> {
        let groups = (self.chunks / 8) as u64;
        let table = DeviceWords::new(&self.table)?;
        // SAFETY: as in add.
        unsafe { butterfly8_async(kernels, StreamId::Compute, table, groups) }
    }
}
