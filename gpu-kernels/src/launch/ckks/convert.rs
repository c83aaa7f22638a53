//! Launchers of `cuda/ckks_convert.cu`: fast base conversion and the centred
//! spread of one limb to many.

use hemem_memory::StreamId;

use super::{LimbMap, MAX_SOURCES, launched, limb_grid, pair_grid};
use crate::launch::Launch;
use crate::{Error, Kernels, Result};

/// Limbs a base conversion launch also copies into its output buffer
/// (ModUp's own limbs, already in NTT form): limb `i` of `src_map` in `src`
/// to limb `i` of `dst_map` in the output.
#[derive(Clone, Copy, Debug)]
pub struct CopyRows<'a> {
    /// Address of the source buffer.
    pub src: u64,
    /// Its limbs.
    pub src_map: &'a LimbMap,
    /// Where they go in the conversion's output buffer.
    pub dst_map: &'a LimbMap,
}

/// Queues a fast base conversion from the limbs of `in_map` to those of
/// `out_map` (coefficient form): approximate, or with `exact` the HPS
/// centred conversion with the CPU's `f64` sequence; plus the copies of
/// `copies`. Grid `(N/512, m + copies)`: each thread converts two
/// coefficients of one target, reading `k` source words each (from L2 after
/// the first target).
///
/// # Errors
/// [`Error::LaunchShape`] for more than [`MAX_SOURCES`] sources or copy maps
/// of different lengths; [`Error::Launch`].
///
/// # Safety
/// The addresses must hold their maps' limbs and be usable on `stream`;
/// `table` must address the conversion tables for exactly these source and
/// target moduli (`3k + 2m + m·k` words: `ckks_convert.cu`'s layout); outputs must not alias inputs, and
/// copied limbs must not overlap converted ones.
#[allow(clippy::too_many_arguments, reason = "operands, tables and the mode")]
pub unsafe fn base_convert_async(
    kernels: &Kernels,
    stream: StreamId,
    (out, out_map): (u64, &LimbMap),
    (input, in_map): (u64, &LimbMap),
    table: u64,
    consts: u64,
    n: u32,
    exact: bool,
    copies: Option<CopyRows<'_>>,
) -> Result<()> {
    if in_map.len() > MAX_SOURCES || in_map.is_empty() {
        return Err(Error::LaunchShape {
            kernel: "base_convert",
            what: "source limbs",
            expected: MAX_SOURCES,
            found: in_map.len(),
        });
    }
    let empty = LimbMap::new(&[], &[])?;
    let (copy_src, copy_src_map, copy_map) = match copies {
        Some(c) if c.src_map.count == c.dst_map.count => (c.src, c.src_map, c.dst_map),
        Some(c) => {
            return Err(Error::LaunchShape {
                kernel: "base_convert",
                what: "copied limbs",
                expected: c.dst_map.len(),
                found: c.src_map.len(),
            });
        }
        None => (0, &empty, &empty),
    };
    if out_map.is_empty() && copy_map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.base_convert);
    let exact = u32::from(exact);
    launch
        .arg(&out)
        .arg(out_map)
        .arg(&input)
        .arg(in_map)
        .arg(&table)
        .arg(&consts)
        .arg(&n)
        .arg(&exact)
        .arg(&copy_src)
        .arg(copy_src_map)
        .arg(copy_map);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, const u64*,
    // const ModConst*, u32, u32, u64, LimbMap, LimbMap); the caller
    // guarantees the memory.
    unsafe { launch.launch(pair_grid(n as usize, out_map.len() + copy_map.len())) }
        .map_err(launched("base_convert"))?;
    Ok(())
}

/// Queues the centred spread of one coefficient-form limb (at `src`, modulo
/// the prime with index `src_modulus`) to every limb of `out_map`.
///
/// # Errors
/// [`Error::Launch`].
///
/// # Safety
/// As [`base_convert_async`]; `src` holds `N` words.
pub unsafe fn spread_centered_async(
    kernels: &Kernels,
    stream: StreamId,
    (out, out_map): (u64, &LimbMap),
    src: u64,
    src_modulus: u32,
    consts: u64,
    n: u32,
) -> Result<()> {
    if out_map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.spread_centered);
    launch
        .arg(&out)
        .arg(out_map)
        .arg(&src)
        .arg(&src_modulus)
        .arg(&consts)
        .arg(&n);
    // SAFETY: PTX signature (u64, LimbMap, u64, u32, const ModConst*, u32).
    unsafe { launch.launch(limb_grid(n as usize, out_map.len())) }
        .map_err(launched("spread_centered"))?;
    Ok(())
}
