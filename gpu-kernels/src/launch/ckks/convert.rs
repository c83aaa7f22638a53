//! Launchers of `cuda/ckks_convert.cu`: fast base conversion and the centred
//! spread of one limb to many.

use cudarc::driver::PushKernelArg;
use hemem_memory::StreamId;

use super::{LimbMap, MAX_SOURCES, launched, limb_grid};
use crate::{Error, Kernels, Result};

/// Queues a fast base conversion from the limbs of `in_map` to those of
/// `out_map` (coefficient form): approximate, or with `exact` the HPS
/// centred conversion with the CPU's `f64` sequence. One thread per
/// coefficient reads `k` source words and writes `m` targets.
///
/// # Errors
/// [`Error::LaunchShape`] for more than [`MAX_SOURCES`] sources; [`Error::Launch`].
///
/// # Safety
/// The addresses must hold their maps' limbs and be usable on `stream`;
/// `table` must address the conversion tables for exactly these source and
/// target moduli (`3k + m + m·k` words); outputs must not alias inputs.
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
) -> Result<()> {
    if in_map.len() > MAX_SOURCES || in_map.is_empty() {
        return Err(Error::LaunchShape {
            kernel: "base_convert",
            what: "source limbs",
            expected: MAX_SOURCES,
            found: in_map.len(),
        });
    }
    let s = kernels.device.stream(stream);
    let mut launch = s.launch_builder(&kernels.ckks.base_convert);
    let exact = u32::from(exact);
    launch
        .arg(&out)
        .arg(out_map)
        .arg(&input)
        .arg(in_map)
        .arg(&table)
        .arg(&consts)
        .arg(&n)
        .arg(&exact);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, const u64*,
    // const ModConst*, u32, u32); the caller guarantees the memory.
    unsafe { launch.launch(limb_grid(n as usize, 1)) }.map_err(launched("base_convert"))?;
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
    let s = kernels.device.stream(stream);
    let mut launch = s.launch_builder(&kernels.ckks.spread_centered);
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
