//! Launchers of `cuda/ckks_ntt.cu`: the batched negacyclic NTT, two kernels
//! per direction (a columns phase and a rows phase), each thread keeping 8
//! points in registers across up to 3 butterfly stages, or, in the rows
//! phase with [`NttRows::Radix16`], 16 points across up to 4.

use cudarc::driver::LaunchConfig;
use hemem_memory::StreamId;

use super::{LimbMap, MAX_SOURCES, launched};
use crate::launch::Launch;
use crate::{Error, Kernels, Result};

/// Points one block transforms (8 per thread, 256 threads).
const BLOCK_LOG_POINTS: u32 = 11;
/// Smallest and largest phase sizes with a compiled kernel.
const MIN_LOG_M: u32 = 5;
const MAX_LOG_COLUMNS: u32 = 8;
const MAX_LOG_ROWS: u32 = 9;

/// The rows-phase kernels of a transform: both give the same outputs, bit
/// for bit (the same butterflies, twiddles and lazy ranges, grouped
/// differently); they differ only in speed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NttRows {
    /// 8 points per thread, radix-8 groups (3 stages per shared-memory
    /// exchange), 256 threads per block: for N = 2^16, three groups and two
    /// exchanges per row.
    #[default]
    Radix8,
    /// 16 points per thread, radix-16 groups (4 stages per exchange), 128
    /// threads per block: for N = 2^16, two groups and one exchange per row,
    /// 8 independent butterflies per thread and stage (Kim, Jung, Park, Ahn,
    /// IISWC 2020, §IV; Jung et al., TCHES 2021, §4.1).
    Radix16,
}

impl NttRows {
    /// `log2` of the points each thread keeps in registers.
    pub fn log_points(self) -> u32 {
        match self {
            Self::Radix8 => 3,
            Self::Radix16 => 4,
        }
    }

    /// The name used in reports: `radix8` or `radix16`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Radix8 => "radix8",
            Self::Radix16 => "radix16",
        }
    }

    /// The variant named `radix8`/`8` or `radix16`/`16` (case-insensitive);
    /// `None` for anything else.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "radix8" | "8" => Some(Self::Radix8),
            "radix16" | "16" => Some(Self::Radix16),
            _ => None,
        }
    }
}

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
    /// The rows-phase kernels (points per thread); the same rows per block
    /// either way.
    pub rows: NttRows,
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
            rows: NttRows::Radix8,
        })
    }

    /// The same geometry with the rows-phase kernels `rows`.
    pub fn with_rows(self, rows: NttRows) -> Self {
        Self { rows, ..self }
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
            1 << (log_points - self.rows.log_points()),
            16 << log_points,
        )
    }

    fn config(
        (blocks, threads, shared): (u32, u32, u32),
        limbs: usize,
        parts: u32,
    ) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (blocks, limbs as u32, parts.max(1)),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: shared,
        }
    }
}

/// Most independent parts of one batched transform (`HEMEM_MAX_PARTS`).
pub const MAX_PARTS: usize = 16;

/// The parts of a batched launch, as `struct Parts` in
/// `cuda/ckks_common.cuh`: part `z` (grid `z`) writes `dst[z]`; `aux[z]`
/// and `extra[z]` are what each kernel says.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parts {
    /// Output buffer of each part.
    pub dst: [u64; MAX_PARTS],
    /// Source (`NTT_LOAD`, inverse) or minuend (ModDown epilogue) buffer.
    pub aux: [u64; MAX_PARTS],
    /// Conversion table (columns) or addend buffer (rows; 0 for none).
    pub extra: [u64; MAX_PARTS],
    /// Sources per part (0: not a conversion).
    pub per: u32,
    /// Source entries in all.
    pub total: u32,
    /// Nonzero: the parts' own entries are copied, not converted (ModUp).
    pub skip: u32,
    /// Padding.
    pub pad: u32,
}

// SAFETY: a plain-old-data `#[repr(C)]` struct with the layout of its CUDA
// counterpart (checked by the size test below); passed by value.
unsafe impl cudarc::driver::DeviceRepr for Parts {}

/// The automorphism each part's addend is read through, as `struct
/// PartGalois` in `cuda/ckks_common.cuh`: part `z` adds `σ_g(addend)` for
/// `g = g[z] > 1` (0 or 1: the addend itself).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartGalois {
    /// Galois element of each part, reduced modulo `2N` (0: none).
    pub g: [u32; MAX_PARTS],
}

// SAFETY: a plain-old-data `#[repr(C)]` struct with the layout of its CUDA
// counterpart (sixteen words); passed by value.
unsafe impl cudarc::driver::DeviceRepr for PartGalois {}

impl Parts {
    /// Parts writing `dst` (at most [`MAX_PARTS`]).
    ///
    /// # Errors
    /// [`Error::LaunchShape`] for no part or too many.
    fn new(dst: &[u64]) -> Result<Self> {
        if dst.is_empty() || dst.len() > MAX_PARTS {
            return Err(Error::LaunchShape {
                kernel: "ntt",
                what: "parts",
                expected: MAX_PARTS,
                found: dst.len(),
            });
        }
        let mut p = Self::default();
        fill(&mut p.dst, dst, "parts")?;
        Ok(p)
    }

    fn count(dst: &[u64]) -> u32 {
        dst.len() as u32
    }

    /// Sources of part `z`.
    fn span(&self, z: u32) -> u32 {
        let start = z * self.per;
        self.total.saturating_sub(start).min(self.per)
    }
}

/// Copies `values` into the first slots of `slots`, one per part.
fn fill(slots: &mut [u64; MAX_PARTS], values: &[u64], what: &'static str) -> Result<()> {
    if values.len() > MAX_PARTS {
        return Err(Error::LaunchShape {
            kernel: "ntt",
            what,
            expected: MAX_PARTS,
            found: values.len(),
        });
    }
    for (slot, &v) in slots.iter_mut().zip(values) {
        *slot = v;
    }
    Ok(())
}

/// What the forward transform's first phase reads, per part.
#[derive(Clone, Copy, Debug)]
pub enum ForwardSource<'a> {
    /// Coefficients: part `z` reads the limbs of `src[z]` through `map` (its
    /// destination for an in-place transform).
    Limbs {
        /// Address of each part's source buffer.
        src: &'a [u64],
        /// The limbs, one per destination limb.
        map: &'a LimbMap,
    },
    /// The fast base conversion of `input`'s limbs (coefficient form) to
    /// the destination's moduli, computed as the first phase loads its
    /// points (the converted limbs are never written): part `z` converts
    /// the entries `[z·per, z·per + per)` of `map` (fewer for the last)
    /// with the table `tables[z]` (the layout of `cuda/ckks_convert.cu`,
    /// for exactly those source moduli and the part's targets in order).
    /// `exact`: the HPS centred conversion with the CPU's `f64` sequence
    /// (ModUp and ModDown); `prescaled`: `input` holds
    /// `y_i = [x_i·q_hat_inv_i]_{q_i}` already (an inverse NTT with the
    /// conversion's scales). With `own: Some((src, src_map))` (ModUp), part
    /// `z`'s own entries of the destination list (the first entries are
    /// the sources' moduli, in order) are copied from `src` (NTT form,
    /// through `src_map`) instead, and its table lists the other entries.
    Convert {
        /// Address of the source buffer.
        input: u64,
        /// Its limbs: every part's sources, part after part.
        map: &'a LimbMap,
        /// Sources per part (the last part may have fewer).
        per: usize,
        /// Device address of each part's conversion table.
        tables: &'a [u64],
        /// Exact (centred) conversion.
        exact: bool,
        /// `input` holds the `y_i`.
        prescaled: bool,
        /// ModUp: the NTT form of the sources, copied into the parts' own
        /// entries.
        own: Option<(u64, &'a LimbMap)>,
    },
    /// Rescaling's centred lift: part `z` lifts entry `z` of `map` (one
    /// limb in coefficient form, modulo its own prime) into every
    /// destination limb.
    Spread {
        /// Address of the source buffer.
        input: u64,
        /// One limb per part.
        map: &'a LimbMap,
    },
    /// Compact plaintexts (`cuda/ckks_encode.cu`): part `z` reads the
    /// `N >> log_gap` words at `src[z]` (the bits of integer-valued `f64`s);
    /// coefficient `k·2^log_gap` is word `k` reduced exactly into each
    /// destination limb's prime, every other coefficient zero. The
    /// coefficient-form limbs are never written.
    Compact {
        /// Address of each part's compact words.
        src: &'a [u64],
        /// `log2` of the gap between nonzero coefficients.
        log_gap: u32,
    },
}

/// What the forward transform's last phase writes.
#[derive(Clone, Copy, Debug)]
pub enum ForwardEpilogue<'a> {
    /// The evaluations, fully reduced.
    Store,
    /// `(aux − v)·s_i` for each limb `i` of the output: ModDown's and
    /// rescaling's last step fused into the transform. Part `z`'s minuend
    /// is `aux[z]` read through `aux_map`; `scale` addresses `(s_i, s_i
    /// shoup)` pairs, one per limb of the output map.
    SubScale {
        /// Address of each part's minuend buffer.
        aux: &'a [u64],
        /// Their limbs.
        aux_map: &'a LimbMap,
        /// Device address of the per-limb `(s, s shoup)` pairs.
        scale: u64,
        /// Address of each part's addend (0: none; empty: none at all),
        /// added to the result (reduced): the addition that follows a key
        /// switch.
        add: &'a [u64],
        /// The addends' limbs.
        add_map: &'a LimbMap,
        /// The automorphism each part's addend is read through (reduced
        /// modulo `2N`, odd; 0 or 1: none; empty: none at all): a rotation's
        /// `σ_g(c0)` added without rotating `c0` first.
        add_galois: &'a [u32],
    },
}

/// Queues the forward NTT (coefficients → bit-reversed evaluations, fully
/// reduced) of `source` into the limbs of `dst_map` in each buffer of `dst`
/// (one part per buffer, at most [`MAX_PARTS`], independent transforms of
/// one launch pair): the columns kernel reads the source and writes the
/// destination, the rows kernel transforms it in place (8·N bytes read and
/// written per limb each, plus the rows' twiddles). Grids: `(C/S, limbs,
/// parts)` and `(R/S, limbs, parts)` blocks of 256 threads (fewer for
/// N < 2^11; the rows phase 128 with [`NttRows::Radix16`]).
///
/// # Errors
/// [`Error::LaunchShape`] for maps of different lengths or lists of
/// different parts; [`Error::Launch`].
///
/// # Safety
/// Every address must hold every limb position of its map (`N` words
/// each; a compact source `N >> log_gap` words), usable on `stream` until
/// the kernels complete, with no concurrent access; sources other than a
/// part's own destination limbs must not overlap any destination (a
/// conversion's sources in particular: the kernel reads them through the
/// read-only data cache, `__ldg`, which does not see the launch's own
/// writes); an addend read through an automorphism must not overlap any
/// destination at all; distinct parts' destinations must not overlap;
/// `consts` and `twiddles` must address the context's modulus table and
/// twiddle tables (4·N words per modulus) covering every modulus index of
/// the maps; conversion tables must match their sources and targets; the
/// epilogue's buffers must hold their maps' limbs and not overlap a
/// destination.
#[allow(
    clippy::too_many_arguments,
    reason = "operands, tables and the epilogue"
)]
pub unsafe fn forward_async(
    kernels: &Kernels,
    stream: StreamId,
    (dst, dst_map): (&[u64], &LimbMap),
    source: ForwardSource<'_>,
    consts: u64,
    twiddles: u64,
    geometry: NttGeometry,
    epilogue: ForwardEpilogue<'_>,
) -> Result<()> {
    if dst_map.is_empty() {
        return Ok(());
    }
    let parts_count = Parts::count(dst);
    let mut parts = Parts::new(dst)?;
    let empty = LimbMap::new(&[], &[])?;
    let (src_map, conv_in, conv_map, mode) = match source {
        ForwardSource::Limbs { src, map } => {
            same_count(dst_map, map)?;
            same_parts(dst, src)?;
            fill(&mut parts.aux, src, "sources")?;
            (map, 0u64, &empty, 0u32)
        }
        ForwardSource::Convert {
            input,
            map,
            per,
            tables,
            exact,
            prescaled,
            own,
        } => {
            same_parts(dst, tables)?;
            let per = u32::try_from(per).unwrap_or(u32::MAX);
            if per == 0
                || per as usize > MAX_SOURCES
                || map.count.div_ceil(per) != parts_count
                || own.is_some_and(|_| map.count > dst_map.count)
            {
                return Err(Error::LaunchShape {
                    kernel: "ntt_fwd_cols",
                    what: "conversion sources",
                    expected: MAX_SOURCES,
                    found: map.len(),
                });
            }
            fill(&mut parts.extra, tables, "tables")?;
            parts.per = per;
            parts.total = map.count;
            let mut src_map = &empty;
            if let Some((src, own_map)) = own {
                // The parts' own entries lead the destination list, in the
                // sources' order.
                let leading = map
                    .modulus
                    .iter()
                    .zip(&dst_map.modulus)
                    .zip(&own_map.modulus);
                if own_map.count < map.count
                    || leading.take(map.len()).any(|((a, b), c)| a != b || a != c)
                {
                    return Err(Error::LaunchShape {
                        kernel: "ntt_fwd_cols",
                        what: "own limbs",
                        expected: map.len(),
                        found: own_map.len(),
                    });
                }
                parts.skip = 1;
                parts.aux = [src; MAX_PARTS];
                src_map = own_map;
            }
            let kind = 1 + u32::from(exact) + if prescaled { 4 } else { 0 };
            (src_map, input, map, kind)
        }
        ForwardSource::Spread { input, map } => {
            if map.count != parts_count {
                return Err(Error::LaunchShape {
                    kernel: "ntt_fwd_cols",
                    what: "spread sources",
                    expected: dst.len(),
                    found: map.len(),
                });
            }
            parts.per = 1;
            parts.total = map.count;
            (&empty, input, map, 3u32)
        }
        ForwardSource::Compact { src, log_gap } => {
            same_parts(dst, src)?;
            if log_gap > geometry.log_n {
                return Err(Error::LaunchShape {
                    kernel: "ntt_fwd_cols",
                    what: "log gap",
                    expected: geometry.log_n as usize,
                    found: log_gap as usize,
                });
            }
            fill(&mut parts.aux, src, "compact sources")?;
            (&empty, 0u64, &empty, 8u32 | (log_gap << 8))
        }
    };
    let k = &kernels.ckks;
    let cols = kernel(&k.ntt_fwd_cols, geometry.log_r, "ntt_fwd_cols")?;
    let rows = match geometry.rows {
        NttRows::Radix8 => kernel(&k.ntt_fwd_rows, geometry.log_c, "ntt_fwd_rows")?,
        NttRows::Radix16 => kernel(&k.ntt_fwd_rows16, geometry.log_c, "ntt_fwd_rows16")?,
    };
    let mut launch = Launch::new(kernels, stream, cols);
    launch
        .arg(&parts)
        .arg(dst_map)
        .arg(src_map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&geometry.log_c)
        .arg(&geometry.cols_log_s)
        .arg(&conv_in)
        .arg(conv_map)
        .arg(&mode);
    // SAFETY: PTX signature (Parts, LimbMap, LimbMap, const ModConst*,
    // const u64*, u32, u32, u64, LimbMap, u32); the caller guarantees the
    // memory; every block owns its columns of one part's limb.
    unsafe {
        launch.launch(NttGeometry::config(
            geometry.columns_shape(),
            dst_map.len(),
            parts_count,
        ))
    }
    .map_err(launched("ntt_fwd_cols"))?;
    // The rows phase passes over the parts' own (copied) limbs: as many
    // limbs as the part with the fewest own ones converts.
    let rows_limbs = if parts.skip != 0 {
        let least = (0..parts_count).map(|z| parts.span(z)).min().unwrap_or(0);
        dst_map.count.saturating_sub(least)
    } else {
        dst_map.count
    };
    let mut galois = PartGalois::default();
    let (aux_map, scale, mode, add_map) = match epilogue {
        ForwardEpilogue::Store => (&empty, 0u64, 0u32, &empty),
        ForwardEpilogue::SubScale {
            aux,
            aux_map,
            scale,
            add,
            add_map,
            add_galois,
        } => {
            same_count(dst_map, aux_map)?;
            same_parts(dst, aux)?;
            parts.aux = [0; MAX_PARTS];
            fill(&mut parts.aux, aux, "minuends")?;
            parts.extra = [0; MAX_PARTS];
            if !add.is_empty() {
                same_count(dst_map, add_map)?;
                same_parts(dst, add)?;
                fill(&mut parts.extra, add, "addends")?;
            }
            if !add_galois.is_empty() {
                let two_n = 2u64 << geometry.log_n;
                if add_galois.len() != add.len() {
                    return Err(Error::LaunchShape {
                        kernel: "ntt_fwd_rows",
                        what: "addend automorphisms",
                        expected: add.len(),
                        found: add_galois.len(),
                    });
                }
                if let Some(&bad) = add_galois
                    .iter()
                    .find(|&&g| g > 1 && (g % 2 == 0 || u64::from(g) >= two_n))
                {
                    return Err(Error::LaunchShape {
                        kernel: "ntt_fwd_rows",
                        what: "addend automorphism (odd, below 2N)",
                        expected: two_n as usize,
                        found: bad as usize,
                    });
                }
                for (slot, &g) in galois.g.iter_mut().zip(add_galois) {
                    *slot = g;
                }
            }
            (aux_map, scale, 1u32, add_map)
        }
    };
    if rows_limbs == 0 {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, rows);
    launch
        .arg(&parts)
        .arg(dst_map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&geometry.log_r)
        .arg(&geometry.rows_log_s)
        .arg(aux_map)
        .arg(&scale)
        .arg(&mode)
        .arg(add_map)
        .arg(&galois);
    // SAFETY: PTX signature (Parts, LimbMap, const ModConst*, const u64*,
    // u32, u32, LimbMap, const u64*, u32, LimbMap, PartGalois); every block
    // owns its rows of one part's limb, and reads its addend (permuted or
    // not) from a buffer no part writes.
    unsafe {
        launch.launch(NttGeometry::config(
            geometry.rows_shape(),
            rows_limbs as usize,
            parts_count,
        ))
    }
    .map_err(launched("ntt_fwd_rows"))?;
    Ok(())
}

/// Queues the inverse NTT (bit-reversed evaluations → coefficients,
/// normalised by `N^{-1}`, fully reduced) of the limbs of each `src[z]`
/// into those of `dst[z]` (may be the same, in place; one part per buffer,
/// at most [`MAX_PARTS`]): the rows kernel reads the source and writes the
/// destination, the columns kernel transforms it in place. With `y_scale`,
/// the last multiplication is by that table's `(s, shoup)` pair of each
/// limb of the map instead of `N^{-1}` (`s = N^{-1}·q_hat_inv`: the `y_i`
/// of a conversion).
///
/// # Errors
/// [`Error::LaunchShape`]; [`Error::Launch`].
///
/// # Safety
/// As [`forward_async`]; `n_inv` must address `(N^{-1}, shoup)` pairs per
/// modulus, `y_scale` a pair per limb of the map.
#[allow(clippy::too_many_arguments, reason = "operands and tables")]
pub unsafe fn inverse_async(
    kernels: &Kernels,
    stream: StreamId,
    (dst, dst_map): (&[u64], &LimbMap),
    (src, src_map): (&[u64], &LimbMap),
    consts: u64,
    twiddles: u64,
    n_inv: u64,
    y_scale: Option<u64>,
    geometry: NttGeometry,
) -> Result<()> {
    if dst_map.is_empty() {
        return Ok(());
    }
    same_count(dst_map, src_map)?;
    same_parts(dst, src)?;
    let parts_count = Parts::count(dst);
    let mut parts = Parts::new(dst)?;
    fill(&mut parts.aux, src, "sources")?;
    let k = &kernels.ckks;
    let rows = match geometry.rows {
        NttRows::Radix8 => kernel(&k.ntt_inv_rows, geometry.log_c, "ntt_inv_rows")?,
        NttRows::Radix16 => kernel(&k.ntt_inv_rows16, geometry.log_c, "ntt_inv_rows16")?,
    };
    let cols = kernel(&k.ntt_inv_cols, geometry.log_r, "ntt_inv_cols")?;
    let mut launch = Launch::new(kernels, stream, rows);
    launch
        .arg(&parts)
        .arg(dst_map)
        .arg(src_map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&geometry.log_r)
        .arg(&geometry.rows_log_s);
    // SAFETY: PTX signature (Parts, LimbMap, LimbMap, const ModConst*,
    // const u64*, u32, u32); see forward_async.
    unsafe {
        launch.launch(NttGeometry::config(
            geometry.rows_shape(),
            dst_map.len(),
            parts_count,
        ))
    }
    .map_err(launched("ntt_inv_rows"))?;
    let (scale, by_limb) = match y_scale {
        Some(table) => (table, 1u32),
        None => (n_inv, 0u32),
    };
    let mut launch = Launch::new(kernels, stream, cols);
    launch
        .arg(&parts)
        .arg(dst_map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&scale)
        .arg(&by_limb)
        .arg(&geometry.log_c)
        .arg(&geometry.cols_log_s);
    // SAFETY: PTX signature (Parts, LimbMap, const ModConst*, const u64*,
    // const u64*, u32, u32, u32); see forward_async.
    unsafe {
        launch.launch(NttGeometry::config(
            geometry.columns_shape(),
            dst_map.len(),
            parts_count,
        ))
    }
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

fn same_parts(a: &[u64], b: &[u64]) -> Result<()> {
    if a.len() == b.len() {
        Ok(())
    } else {
        Err(Error::LaunchShape {
            kernel: "ntt",
            what: "parts",
            expected: a.len(),
            found: b.len(),
        })
    }
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
            let (rb16, rt16, rs16) = g.with_rows(NttRows::Radix16).rows_shape();
            assert_eq!((rb16, rs16), (rb, rs));
            assert_eq!(rb16 * rt16 * 16, 1 << log_n, "rows16 {log_n}");
            assert!(rt16 >= 2);
            assert!(cs <= 48 * 1024 && rs <= 48 * 1024);
            assert!((32..=256).contains(&ct) && (32..=256).contains(&rt));
        }
        assert!(NttGeometry::new(9).is_err());
        assert!(NttGeometry::new(18).is_err());
    }

    #[test]
    fn parts_match_the_cuda_struct() {
        assert_eq!(std::mem::size_of::<Parts>(), 3 * 8 * MAX_PARTS + 16);
        assert_eq!(std::mem::size_of::<PartGalois>(), 4 * MAX_PARTS);
        let p = Parts {
            per: 5,
            total: 13,
            ..Parts::default()
        };
        // Digits of 5, 5 and 3 limbs.
        assert_eq!((p.span(0), p.span(1), p.span(2), p.span(3)), (5, 5, 3, 0));
    }
}
