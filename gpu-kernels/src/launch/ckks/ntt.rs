//! Launchers of `cuda/ckks_ntt.cu`: the batched negacyclic NTT, two kernels
//! per direction.

use cudarc::driver::{LaunchConfig, PushKernelArg};
use hemem_memory::StreamId;

use super::{LimbMap, launched};
use crate::{Error, Kernels, Result};

/// Elements one block transforms in shared memory (8 per thread).
const BLOCK_ELEMENTS: u32 = 2048;

/// Geometry of the two phases for degree `2^log_n`: the column phase runs
/// the first `log_r` stages on `R = 2^log_r` rows of `2^log_cols` adjacent
/// columns per block; the row phase runs the rest on `rows` contiguous
/// chunks of `N/R` words per block. 8 elements per thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NttGeometry {
    /// `log2 N`.
    pub log_n: u32,
    /// `log2 R`, stages of the column phase.
    pub log_r: u32,
    /// `log2` of the columns per block.
    pub log_cols: u32,
    /// Chunks per block in the row phase.
    pub rows: u32,
}

impl NttGeometry {
    /// The geometry for `2^log_n` (10 ≤ log_n ≤ 17).
    ///
    /// # Errors
    /// [`Error::LaunchShape`] outside that range.
    pub fn new(log_n: u32) -> Result<Self> {
        if !(10..=17).contains(&log_n) {
            return Err(Error::LaunchShape {
                kernel: "ntt",
                what: "log N",
                expected: 17,
                found: log_n as usize,
            });
        }
        let log_r = log_n.div_ceil(2);
        let log_c = log_n - log_r;
        let block_log = BLOCK_ELEMENTS.trailing_zeros();
        let log_cols = log_c.min(block_log.saturating_sub(log_r));
        let rows = 1u32 << (block_log.saturating_sub(log_c)).min(log_r);
        Ok(Self {
            log_n,
            log_r,
            log_cols,
            rows,
        })
    }

    fn columns(&self, limbs: usize) -> LaunchConfig {
        let elements = 1u32 << (self.log_r + self.log_cols);
        let blocks = 1u32 << (self.log_n - self.log_r - self.log_cols);
        LaunchConfig {
            grid_dim: (blocks, limbs as u32, 1),
            block_dim: ((elements / 8).clamp(32, 1024), 1, 1),
            shared_mem_bytes: elements * 8,
        }
    }

    fn rows_config(&self, limbs: usize) -> LaunchConfig {
        let elements = self.rows << (self.log_n - self.log_r);
        let blocks = (1u32 << self.log_r) / self.rows;
        LaunchConfig {
            grid_dim: (blocks, limbs as u32, 1),
            block_dim: ((elements / 8).clamp(32, 1024), 1, 1),
            shared_mem_bytes: elements * 8,
        }
    }
}

/// Queues the forward NTT (coefficients → bit-reversed evaluations, fully
/// reduced) of every limb of `map` in the buffer at `data`: the column and
/// row kernels, each reading and writing `8·N` bytes per limb.
///
/// # Errors
/// [`Error::Launch`].
///
/// # Safety
/// `data` must address a device buffer holding every limb position of `map`
/// (`N` words each), usable on `stream` until the kernels complete, with no
/// concurrent access; `consts` and `twiddles` must address the context's
/// modulus table and twiddle tables (4·N words per modulus) covering every
/// modulus index of `map`.
pub unsafe fn forward_async(
    kernels: &Kernels,
    stream: StreamId,
    data: u64,
    map: &LimbMap,
    consts: u64,
    twiddles: u64,
    geometry: NttGeometry,
) -> Result<()> {
    if map.is_empty() {
        return Ok(());
    }
    let s = kernels.device.stream(stream);
    let k = &kernels.ckks;
    let mut launch = s.launch_builder(&k.ntt_forward_columns);
    launch
        .arg(&data)
        .arg(map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&geometry.log_n)
        .arg(&geometry.log_r)
        .arg(&geometry.log_cols);
    // SAFETY: PTX signature (u64, LimbMap, const ModConst*, const u64*, u32,
    // u32, u32); the caller guarantees the memory; the geometry gives every
    // block its own columns.
    unsafe { launch.launch(geometry.columns(map.len())) }
        .map_err(launched("ntt_forward_columns"))?;
    let mut launch = s.launch_builder(&k.ntt_forward_rows);
    launch
        .arg(&data)
        .arg(map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&geometry.log_n)
        .arg(&geometry.log_r)
        .arg(&geometry.rows);
    // SAFETY: as above; every block owns its chunks.
    unsafe { launch.launch(geometry.rows_config(map.len())) }
        .map_err(launched("ntt_forward_rows"))?;
    Ok(())
}

/// Queues the inverse NTT (bit-reversed evaluations → coefficients,
/// normalised by `N^{-1}`, fully reduced) of every limb of `map`.
///
/// # Errors
/// [`Error::Launch`].
///
/// # Safety
/// As [`forward_async`]; `n_inv` must address `(N^{-1}, shoup)` pairs per
/// modulus.
#[allow(clippy::too_many_arguments, reason = "the kernel's tables")]
pub unsafe fn inverse_async(
    kernels: &Kernels,
    stream: StreamId,
    data: u64,
    map: &LimbMap,
    consts: u64,
    twiddles: u64,
    n_inv: u64,
    geometry: NttGeometry,
) -> Result<()> {
    if map.is_empty() {
        return Ok(());
    }
    let s = kernels.device.stream(stream);
    let k = &kernels.ckks;
    let mut launch = s.launch_builder(&k.ntt_inverse_rows);
    launch
        .arg(&data)
        .arg(map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&geometry.log_n)
        .arg(&geometry.log_r)
        .arg(&geometry.rows);
    // SAFETY: PTX signature (u64, LimbMap, const ModConst*, const u64*, u32,
    // u32, u32); see forward_async.
    unsafe { launch.launch(geometry.rows_config(map.len())) }
        .map_err(launched("ntt_inverse_rows"))?;
    let mut launch = s.launch_builder(&k.ntt_inverse_columns);
    launch
        .arg(&data)
        .arg(map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&n_inv)
        .arg(&geometry.log_n)
        .arg(&geometry.log_r)
        .arg(&geometry.log_cols);
    // SAFETY: PTX signature (u64, LimbMap, const ModConst*, const u64*,
    // const u64*, u32, u32, u32); see forward_async.
    unsafe { launch.launch(geometry.columns(map.len())) }
        .map_err(launched("ntt_inverse_columns"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_covers_every_degree() {
        for log_n in 10..=17 {
            let g = NttGeometry::new(log_n).unwrap();
            let c = g.columns(3);
            let r = g.rows_config(3);
            // Every column and every chunk is covered exactly once.
            assert_eq!(
                c.grid_dim.0 << (g.log_r + g.log_cols),
                1 << log_n,
                "columns {log_n}"
            );
            assert_eq!(
                r.grid_dim.0 * (g.rows << (log_n - g.log_r)),
                1 << log_n,
                "rows {log_n}"
            );
            assert!(c.shared_mem_bytes <= 48 * 1024 && r.shared_mem_bytes <= 48 * 1024);
            assert!(c.block_dim.0 <= 1024 && r.block_dim.0 <= 1024);
        }
        assert!(NttGeometry::new(9).is_err());
    }
}
