//! Launchers of the expansion of compact plaintexts (one rounded `f64` word
//! per nonzero coefficient) into RNS limbs: `cuda/ckks_encode.cu` into
//! coefficient form, and `expand_periodic` (`cuda/ckks_ntt.cu`) straight
//! into NTT form for polynomials in `X^{N/M}` with few points `M`.

use cudarc::driver::LaunchConfig;
use hemem_memory::StreamId;

use super::{BLOCK, LimbMap, MAX_DIGITS, PtrArray, launched};
use crate::launch::Launch;
use crate::{Error, Kernels, Result};

/// Most compact plaintexts one launch expands (one [`PtrArray`] entry each).
pub const MAX_EXPAND_PARTS: usize = MAX_DIGITS;

/// The shape error of `kernel`: `(what, expected, found)`.
fn shape_error(kernel: &'static str) -> impl Fn(&'static str, usize, usize) -> Error {
    move |what, expected, found| Error::LaunchShape {
        kernel,
        what,
        expected,
        found,
    }
}

/// One source per destination, and from one to [`MAX_EXPAND_PARTS`] parts.
fn check_parts(
    dst: &[u64],
    src: &[u64],
    shape: &impl Fn(&'static str, usize, usize) -> Error,
) -> Result<()> {
    if dst.len() != src.len() {
        return Err(shape("sources", dst.len(), src.len()));
    }
    if dst.is_empty() || dst.len() > MAX_EXPAND_PARTS {
        return Err(shape("parts", MAX_EXPAND_PARTS, dst.len()));
    }
    Ok(())
}

/// Queues the expansion of `src.len()` compact plaintexts: part `z` reads
/// the `N >> log_gap` words at `src[z]` (the bits of integer-valued `f64`s)
/// and writes the limbs of `map` in the buffer `dst[z]`, coefficient form:
/// coefficient `k·2^log_gap` is word `k` reduced exactly modulo the limb's
/// prime, every other coefficient zero. Grid `(N/512, limbs, parts)`, two
/// coefficients per thread; writes `8·N` bytes per limb and part, reads
/// the compact words (`8·N/gap` per part, from L2 after the first limb).
///
/// # Errors
/// [`Error::LaunchShape`] for different part counts, no part or more than
/// [`MAX_EXPAND_PARTS`], or `log_gap` beyond `log N`; [`Error::Launch`].
///
/// # Safety
/// Each `dst[z]` must hold the limb positions of `map` (`N` words each) and
/// each `src[z]` at least `N >> log_gap` words, all usable on `stream` until
/// the kernel completes; `consts` must cover `map`'s modulus indices; no
/// destination may overlap another part's destination or any source.
#[allow(clippy::too_many_arguments, reason = "operands, map and shape")]
pub unsafe fn expand_compact_async(
    kernels: &Kernels,
    stream: StreamId,
    dst: &[u64],
    src: &[u64],
    map: &LimbMap,
    consts: u64,
    n: u32,
    log_gap: u32,
) -> Result<()> {
    let shape = shape_error("expand_compact");
    check_parts(dst, src, &shape)?;
    if n < 2 || !n.is_power_of_two() || log_gap > n.trailing_zeros() {
        return Err(shape(
            "log gap",
            n.trailing_zeros() as usize,
            log_gap as usize,
        ));
    }
    if map.is_empty() {
        return Ok(());
    }
    let (dst_array, src_array) = (PtrArray::new(dst)?, PtrArray::new(src)?);
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.expand_compact);
    launch
        .arg(&dst_array)
        .arg(&src_array)
        .arg(map)
        .arg(&consts)
        .arg(&n)
        .arg(&log_gap);
    let blocks = (n as usize / 2).div_ceil(BLOCK as usize).clamp(1, 65_535) as u32;
    let config = LaunchConfig {
        grid_dim: (blocks, map.len() as u32, dst.len() as u32),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: PTX signature (PtrArray, PtrArray, LimbMap, const ModConst*,
    // u32, u32); the caller guarantees the memory.
    unsafe { launch.launch(config) }.map_err(launched("expand_compact"))?;
    Ok(())
}

/// The most points [`expand_periodic_async`] transforms (one block's shared
/// memory: 32 KiB).
pub const MAX_PERIODIC_POINTS: u32 = 4096;

/// Output words each block of [`expand_periodic_async`] writes at least:
/// every block transforms its limb's points again, so fewer, larger shares
/// for small transforms would leave SMs idle and more would repeat work.
const PERIODIC_SHARE: u32 = 8192;

/// Queues the expansion of `src.len()` compact plaintexts whose words are
/// the `M = 2^log_m` coefficients of a polynomial in `X^{N/M}` (a message
/// whose slots repeat, `hemem_ckks::ntt::forward_subring`) straight into NTT
/// form: part `z` reads the `M` words at `src[z]` and writes the limbs of
/// `map` in the buffer `dst[z]`. With `whole`, a limb is `N` words, each
/// of the `M` transformed values `N/M` times; without, a limb is the `M`
/// values alone (the periodic form, limb at position `p` from word `p·M`).
/// Grid `(outputs/8192, limbs, parts)`: every block transforms its limb's
/// `M` points in shared memory with the forward twiddles at `twiddles` (the
/// context's table, 4N words per modulus) and writes up to 8192 outputs.
///
/// # Errors
/// [`Error::LaunchShape`] for different part counts, no part or more than
/// [`MAX_EXPAND_PARTS`], or `M` below 2 or above `N` or
/// [`MAX_PERIODIC_POINTS`]; [`Error::Launch`].
///
/// # Safety
/// Each `dst[z]` must hold the limb positions of `map` (`N` words each, or
/// `M` without `whole`) and each `src[z]` at least `M` words, all usable on
/// `stream` until the kernel completes; `consts` and `twiddles` must cover
/// `map`'s modulus indices; no destination may overlap another part's
/// destination or any source.
#[allow(clippy::too_many_arguments, reason = "operands, map, tables and shape")]
pub unsafe fn expand_periodic_async(
    kernels: &Kernels,
    stream: StreamId,
    dst: &[u64],
    src: &[u64],
    map: &LimbMap,
    consts: u64,
    twiddles: u64,
    n: u32,
    log_m: u32,
    whole: bool,
) -> Result<()> {
    let shape = shape_error("expand_periodic");
    check_parts(dst, src, &shape)?;
    let points = 1u64 << log_m.min(63);
    if n < 2
        || !n.is_power_of_two()
        || log_m == 0
        || log_m > n.trailing_zeros()
        || points > u64::from(MAX_PERIODIC_POINTS)
    {
        return Err(shape(
            "log points",
            n.min(MAX_PERIODIC_POINTS).trailing_zeros() as usize,
            log_m as usize,
        ));
    }
    let log_out = if whole { n.trailing_zeros() } else { log_m };
    if map.is_empty() {
        return Ok(());
    }
    let (dst_array, src_array) = (PtrArray::new(dst)?, PtrArray::new(src)?);
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.expand_periodic);
    launch
        .arg(&dst_array)
        .arg(&src_array)
        .arg(map)
        .arg(&consts)
        .arg(&twiddles)
        .arg(&n)
        .arg(&log_m)
        .arg(&log_out);
    let config = LaunchConfig {
        grid_dim: (
            (1u32 << log_out).div_ceil(PERIODIC_SHARE),
            map.len() as u32,
            dst.len() as u32,
        ),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: (points * 8) as u32,
    };
    // SAFETY: PTX signature (PtrArray, PtrArray, LimbMap, const ModConst*,
    // const u64*, u32, u32, u32); the caller guarantees the memory.
    unsafe { launch.launch(config) }.map_err(launched("expand_periodic"))?;
    Ok(())
}
