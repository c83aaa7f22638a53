//! Launchers of `cuda/ckks_ntt.cu`: the batched negacyclic NTT, two kernels
//! per direction (a columns phase and a rows phase), each thread keeping 8
//! points in registers across up to 3 butterfly stages.

use cudarc::driver::{LaunchConfig, PushKernelArg};
use hemem_memory::StreamId;

use super::{LimbMap, MAX_SOURCES, launched};
use crate::{Error, Kernels, Result};

/// Points one block transforms (8 per thread, 256 threads).
const BLOCK_LOG_POINTS: u32 = 11;
/// Smallest and largest phase sizes with a compiled kernel.
const MIN_LOG_M: u32 = 5;
const MAX_LOG_COLUMNS: u32 = 8;
const MAX_LOG_ROWS: u32 = 9;

/// Geometry of the two phases for degree `2^log_n`: `R = 2^log_r` rows of
/// `C = 2^log_c` columns. The columns phase runs stages `0 .. log_r` on
/// `2^cols_log_s` adjacent columns per block; the rows phase runs the others
/// on `2^rows_log_s` contiguous rows per block. A sub-transform of `M`
/// points takes `M/8` threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NttGeometry {
    /// `log2 N`.
    pub log_n: u32,
    /// `log2 R`: stages of the columns phase (`min(8, log_n / 2)`).
    pub log_r: u32,
    /// `log2 C = log_n − log_r`: stages of the rows phase.
    pub log_c: u32,
    /// `log2` of the columns per block in the columns phase.
    pub cols_log_s: u32,
    /// `log2` of the rows per block in the rows phase.
    pub rows_log_s: u32,
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
        let log_r = (log_n / 2).min(MAX_LOG_COLUMNS);
        let log_c = log_n - log_r;
        debug_assert!(log_r >= MIN_LOG_M && log_c <= MAX_LOG_ROWS);
        Ok(Self {
            log_n,
            log_r,
            log_c,
            cols_log_s: (BLOCK_LOG_POINTS - log_r).min(log_c),
            rows_log_s: (BLOCK_LOG_POINTS - log_c).min(log_r),
        })
    }

    /// Launch shape of the columns phase: `(blocks per limb, threads per
    /// block, shared bytes)`.
    pub fn columns_shape(&self) -> (u32, u32, u32) {
        let log_points = self.log_r + self.cols_log_s;
        (
            1 << (self.log_c - self.cols_log_s),
            1 << (log_points - 3),
            16 << log_points,
        )
    }

    /// Launch shape of the rows phase: `(blocks per limb, threads per block,
    /// shared bytes)`.
    pub fn rows_shape(&self) -> (u32, u32, u32) {
        let log_points = self.log_c + self.rows_log_s;
        (
            1 << (self.log_r - self.rows_log_s),
            1 << (log_points - 3),
            16 << log_points,
        )
    }

    fn config((blocks, threads, shared): (u32, u32, u32), limbs: usize) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (blocks, limbs as u32, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: shared,
        }
    }
}

/// What the forward transform's first phase reads.
#[derive(Clone, Copy, Debug)]
pub enum ForwardSource<'a> {
    /// Coefficients: the limbs of a buffer (the destination itself for an
    /// in-place transform).
    Limbs {
        /// Address of the buffer.
        src: u64,
        /// Its limbs, one per destination limb.
        map: &'a LimbMap,
    },
    /// The fast base conversion of `input`'s limbs (coefficient form, at
    /// most [`MAX_SOURCES`]) to the destination's moduli, computed as the
    /// first phase loads its points (the converted limbs are never written):
    /// ModUp (`exact = false`) and ModDown (`exact = true`, the HPS centred
    /// conversion with the CPU's `f64` sequence). `table` addresses the
    /// conversion table of `cuda/ckks_convert.cu` for exactly these source
    /// moduli and the destination's moduli in order.
    Convert {
        /// Address of the source buffer.
        input: u64,
        /// Its limbs.
        map: &'a LimbMap,
        /// Device address of the conversion table.
        table: u64,
        /// Exact (centred) conversion.
        exact: bool,
    },
}

/// What the forward transform's last phase writes.
#[derive(Clone, Copy, Debug)]
pub enum ForwardEpilogue<'a> {
    /// The evaluations, fully reduced.
    Store,
    /// `(aux − v)·s_i` for each limb `i` of the output: ModDown's and
    /// rescaling's last step fused into the transform. `aux` is read through
    /// its map; `scale` addresses `(s_i, s_i shoup)` pairs, one per limb of
    /// the output map.
    SubScale {
        /// Address of the minuend's buffer.
        aux: u64,
        /// Its limbs.
        aux_map: &'a LimbMap,
        /// Device address of the per-limb `(s, s shoup)` pairs.
        scale: u64,
        /// `(address, map)` of limbs added to the result (reduced), as the
        /// addition that follows a key switch.
        add: Option<(u64, &'a LimbMap)>,
    },
}

/// Queues the forward NTT (coefficients → bit-reversed evaluations, fully
/// reduced) of `source` into the limbs of `dst`, which may be the source
/// buffer and map (in place): the columns kernel reads the source and
/// writes `dst`, the rows kernel transforms `dst` (8·N bytes read and
/// written per limb each, plus the rows' twiddles). Grids: `(C/S, limbs)`
/// and `(R/S, limbs)` blocks of 256 threads (fewer for N < 2^11).
///
/// # Errors
/// [`Error::LaunchShape`] for maps of different lengths; [`Error::Launch`].
///
/// # Safety
/// `dst` and `src` must address device buffers holding every limb position
/// of their maps (`N` words each), usable on `stream` until the kernels
/// complete, with no concurrent access; `src` limbs other than `dst`'s own
/// must not overlap `dst`'s; `consts` and `twiddles` must address the
/// context's modulus table and twiddle tables (4·N words per modulus)
/// covering every modulus index of `dst_map`; the epilogue's buffers must
/// hold their maps' limbs and not overlap `dst`.
#[allow(
    clippy::too_many_arguments,
    reason = "operands, tables and the epilogue"
)]
pub unsafe fn forward_async(
    kernels: &Kernels,
    stream: StreamId,
    (dst, dst_map): (u64, &LimbMap),
    source: ForwardSource<'_>,
    consts: u64,
    twiddles: u64,
    geometry: NttGeometry,
    epilogue: ForwardEpilogue<'_>,
) -> Result<()> {
    if dst_map.is_empty() {
        return Ok(());
    }
    let empty = LimbMap::new(&[], &[])?;
    let (src, src_map, conv_in, conv_map, table, mode) = match source {
        ForwardSource::Limbs { src, map } => {
            same_count(dst_map, map)?;
            (src, map, 0u64, &empty, 0u64, 0u32)
        }
        ForwardSource::Convert {
            input,
            map,
            table,
            exact,
        } => {
            if map.is_empty() || map.len() > MAX_SOURCES {
                return Err(Error::LaunchShape {
                    kernel: "ntt_fwd_cols",
                    what: "conversion sources",
                    expected: MAX_SOURCES,
                    found: map.len(),
                });
            }
            (dst, dst_map, input, map, table, 1 + u32::from(exact))
        }
    };
    let s = kernels.device.stream(stream);
    let k = &kernels.ckks;
    let cols = kernel(&k.ntt_fwd_cols, geometry.log_r, "ntt_fwd_cols")?;
    let rows = kernel(&k.ntt_fwd_rows, geometry.log_c, "ntt_fwd_rows")?;
    let mut launch = s.launch_builder(cols);
    launch
        .arg(&dst)
        .arg(dst_map)
        .arg(&src)
        .arg(src_map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&geometry.log_c)
        .arg(&geometry.cols_log_s)
        .arg(&conv_in)
        .arg(conv_map)
        .arg(&table)
        .arg(&mode);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, const ModConst*,
    // const u64*, u32, u32, u64, LimbMap, const u64*, u32); the caller
    // guarantees the memory; every block owns its columns.
    unsafe { launch.launch(NttGeometry::config(geometry.columns_shape(), dst_map.len())) }
        .map_err(launched("ntt_fwd_cols"))?;
    let (aux, aux_map, scale, mode, add, add_map) = match epilogue {
        ForwardEpilogue::Store => (dst, dst_map, 0u64, 0u32, 0u64, &empty),
        ForwardEpilogue::SubScale {
            aux,
            aux_map,
            scale,
            add: None,
        } => {
            same_count(dst_map, aux_map)?;
            (aux, aux_map, scale, 1u32, 0u64, &empty)
        }
        ForwardEpilogue::SubScale {
            aux,
            aux_map,
            scale,
            add: Some((add, add_map)),
        } => {
            same_count(dst_map, aux_map)?;
            same_count(dst_map, add_map)?;
            (aux, aux_map, scale, 2u32, add, add_map)
        }
    };
    let mut launch = s.launch_builder(rows);
    launch
        .arg(&dst)
        .arg(dst_map)
        .arg(&dst)
        .arg(dst_map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&geometry.log_r)
        .arg(&geometry.rows_log_s)
        .arg(&aux)
        .arg(aux_map)
        .arg(&scale)
        .arg(&mode)
        .arg(&add)
        .arg(add_map);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, const ModConst*,
    // const u64*, u32, u32, u64, LimbMap, const u64*, u32, u64, LimbMap);
    // every block owns its rows.
    unsafe { launch.launch(NttGeometry::config(geometry.rows_shape(), dst_map.len())) }
        .map_err(launched("ntt_fwd_rows"))?;
    Ok(())
}

/// Queues the inverse NTT (bit-reversed evaluations → coefficients,
/// normalised by `N^{-1}`, fully reduced) of the limbs of `src` into those
/// of `dst` (may be the same, in place): the rows kernel reads `src` and
/// writes `dst`, the columns kernel transforms `dst`.
///
/// # Errors
/// [`Error::LaunchShape`]; [`Error::Launch`].
///
/// # Safety
/// As [`forward_async`]; `n_inv` must address `(N^{-1}, shoup)` pairs per
/// modulus.
#[allow(clippy::too_many_arguments, reason = "operands and tables")]
pub unsafe fn inverse_async(
    kernels: &Kernels,
    stream: StreamId,
    (dst, dst_map): (u64, &LimbMap),
    (src, src_map): (u64, &LimbMap),
    consts: u64,
    twiddles: u64,
    n_inv: u64,
    geometry: NttGeometry,
) -> Result<()> {
    if dst_map.is_empty() {
        return Ok(());
    }
    same_count(dst_map, src_map)?;
    let s = kernels.device.stream(stream);
    let k = &kernels.ckks;
    let rows = kernel(&k.ntt_inv_rows, geometry.log_c, "ntt_inv_rows")?;
    let cols = kernel(&k.ntt_inv_cols, geometry.log_r, "ntt_inv_cols")?;
    let mut launch = s.launch_builder(rows);
    launch
        .arg(&dst)
        .arg(dst_map)
        .arg(&src)
        .arg(src_map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&geometry.log_r)
        .arg(&geometry.rows_log_s);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, const ModConst*,
    // const u64*, u32, u32); see forward_async.
    unsafe { launch.launch(NttGeometry::config(geometry.rows_shape(), dst_map.len())) }
        .map_err(launched("ntt_inv_rows"))?;
    let mut launch = s.launch_builder(cols);
    launch
        .arg(&dst)
        .arg(dst_map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&n_inv)
        .arg(&geometry.log_c)
        .arg(&geometry.cols_log_s);
    // SAFETY: PTX signature (u64, LimbMap, const ModConst*, const u64*,
    // const u64*, u32, u32); see forward_async.
    unsafe { launch.launch(NttGeometry::config(geometry.columns_shape(), dst_map.len())) }
        .map_err(launched("ntt_inv_cols"))?;
    Ok(())
}

/// The kernel of a phase of `2^log_m` points.
fn kernel<'a, const K: usize>(
    table: &'a [cudarc::driver::CudaFunction; K],
    log_m: u32,
    name: &'static str,
) -> Result<&'a cudarc::driver::CudaFunction> {
    log_m
        .checked_sub(MIN_LOG_M)
        .and_then(|i| table.get(i as usize))
        .ok_or(Error::LaunchShape {
            kernel: name,
            what: "log M",
            expected: MIN_LOG_M as usize + K - 1,
            found: log_m as usize,
        })
}

fn same_count(a: &LimbMap, b: &LimbMap) -> Result<()> {
    if a.count == b.count {
        Ok(())
    } else {
        Err(Error::LaunchShape {
            kernel: "ntt",
            what: "limbs",
            expected: a.len(),
            found: b.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_covers_every_degree() {
        for log_n in 10..=17 {
            let g = NttGeometry::new(log_n).unwrap();
            assert_eq!(g.log_r + g.log_c, log_n);
            assert!((MIN_LOG_M..=MAX_LOG_COLUMNS).contains(&g.log_r), "{log_n}");
            assert!((MIN_LOG_M..=MAX_LOG_ROWS).contains(&g.log_c), "{log_n}");
            let (cb, ct, cs) = g.columns_shape();
            let (rb, rt, rs) = g.rows_shape();
            // Every column and every row is covered exactly once, 8 points a thread.
            assert_eq!(cb * ct * 8, 1 << log_n, "columns {log_n}");
            assert_eq!(rb * rt * 8, 1 << log_n, "rows {log_n}");
            assert!(cs <= 48 * 1024 && rs <= 48 * 1024);
            assert!((32..=256).contains(&ct) && (32..=256).contains(&rt));
        }
        assert!(NttGeometry::new(9).is_err());
        assert!(NttGeometry::new(18).is_err());
    }
}
