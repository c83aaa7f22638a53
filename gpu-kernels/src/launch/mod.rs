//! Typed launchers, one family per CUDA source file.
//!
//! Each kernel has one `unsafe fn …_async` taking typed device views and
//! returning [`crate::Error::LaunchShape`] on bad lengths; its `# Safety`
//! states what it cannot check (stream ordering, aliasing, the PTX ABI).
//! The safe wrappers beside them launch on the buffers' own stream, which is
//! what makes them sound: a buffer's memory is allocated and freed in that
//! stream's order.

pub mod bench;
pub mod ckks;
pub mod touch;

use cudarc::driver::LaunchConfig;

/// Threads per block of the element-wise kernels.
const BLOCK: u32 = 256;
/// Most blocks of a grid-stride launch.
const MAX_BLOCKS: u64 = 4096;

/// A one-dimensional grid-stride launch over `items` items.
fn grid_stride(items: u64, block: u32) -> LaunchConfig {
    let blocks = items.div_ceil(u64::from(block)).clamp(1, MAX_BLOCKS);
    LaunchConfig {
        grid_dim: (u32::try_from(blocks).unwrap_or(1), 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_are_bounded() {
        assert_eq!(grid_stride(0, BLOCK).grid_dim, (1, 1, 1));
        assert_eq!(grid_stride(257, BLOCK).grid_dim, (2, 1, 1));
        assert_eq!(grid_stride(1 << 40, BLOCK).grid_dim, (4096, 1, 1));
    }
}
