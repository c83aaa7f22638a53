//! Launchers of `cuda/ckks_arith.cu`: element-wise operations, the tensor
//! product, the fused key-switching inner product and automorphisms. Each
//! launch covers `limbs × N` words with a `(N/256, limbs)` grid.

use cudarc::driver::DeviceRepr;
use hemem_memory::StreamId;

use super::{ElementOp, LimbMap, PtrArray, Scalars, launched, limb_grid, pair_grid};
use crate::launch::Launch;
use crate::{Error, Kernels, Result};

fn same_count(kernel: &'static str, expected: &LimbMap, others: &[&LimbMap]) -> Result<()> {
    for m in others {
        if m.count != expected.count {
            return Err(Error::LaunchShape {
                kernel,
                what: "limbs",
                expected: expected.len(),
                found: m.len(),
            });
        }
    }
    Ok(())
}

/// Queues `out = a op b` limb by limb (reads `16·N`, writes `8·N` bytes per
/// limb). `out` may be `a` or `b` itself.
///
/// # Errors
/// [`Error::LaunchShape`] for maps of different lengths; [`Error::Launch`].
///
/// # Safety
/// Every address must hold the limb positions of its map (`N` words each)
/// and be usable on `stream` until the kernel completes; `consts` must cover
/// `out_map`'s modulus indices; no other work may touch `out` concurrently.
#[allow(clippy::too_many_arguments, reason = "three operands and their maps")]
pub unsafe fn binary_async(
    kernels: &Kernels,
    stream: StreamId,
    op: ElementOp,
    (out, out_map): (u64, &LimbMap),
    (a, a_map): (u64, &LimbMap),
    (b, b_map): (u64, &LimbMap),
    consts: u64,
    n: u32,
) -> Result<()> {
    same_count("binary_op", out_map, &[a_map, b_map])?;
    if out_map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.binary_op);
    let code = op as u32;
    launch
        .arg(&out)
        .arg(out_map)
        .arg(&a)
        .arg(a_map)
        .arg(&b)
        .arg(b_map)
        .arg(&consts)
        .arg(&n)
        .arg(&code);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, u64, LimbMap,
    // const ModConst*, u32, u32); the caller guarantees the memory.
    unsafe { launch.launch(pair_grid(n as usize, out_map.len())) }
        .map_err(launched("binary_op"))?;
    Ok(())
}

/// Queues `acc += a·b` limb by limb.
///
/// # Errors
/// [`Error::LaunchShape`]; [`Error::Launch`].
///
/// # Safety
/// As [`binary_async`].
#[allow(clippy::too_many_arguments, reason = "three operands and their maps")]
pub unsafe fn mul_add_async(
    kernels: &Kernels,
    stream: StreamId,
    (acc, acc_map): (u64, &LimbMap),
    (a, a_map): (u64, &LimbMap),
    (b, b_map): (u64, &LimbMap),
    consts: u64,
    n: u32,
) -> Result<()> {
    same_count("mul_add", acc_map, &[a_map, b_map])?;
    if acc_map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.mul_add);
    launch
        .arg(&acc)
        .arg(acc_map)
        .arg(&a)
        .arg(a_map)
        .arg(&b)
        .arg(b_map)
        .arg(&consts)
        .arg(&n);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, u64, LimbMap,
    // const ModConst*, u32); as binary_async.
    unsafe { launch.launch(pair_grid(n as usize, acc_map.len())) }.map_err(launched("mul_add"))?;
    Ok(())
}

/// Most products [`mul_sum_async`] adds in one launch (`HEMEM_MAX_SUM_TERMS`
/// in `cuda/ckks_arith.cu`: eight products below `2^124` and the old sum
/// stay below `2^128`).
pub const MAX_SUM_TERMS: usize = 8;

/// The gap of each second operand of [`mul_sum_async`], as `struct
/// SumGaps`: `log[t] = g > 0` reads `b_t` as the `N >> g` distinct values
/// a limb of a polynomial in `X^{2^g}` (value `c` at word `c >> g`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SumGaps {
    /// `log2` of each term's gap; 0 for a full limb.
    pub log: [u32; MAX_SUM_TERMS],
}

// SAFETY: `repr(C)` of `u32`s, as the kernel's `struct SumGaps`.
unsafe impl DeviceRepr for SumGaps {}

/// Queues `out = Σ_t a_t·b_t` (with `accumulate`, `out += Σ_t a_t·b_t`)
/// limb by limb, over up to [`MAX_SUM_TERMS`] pairs: every `a_t` is laid
/// out as `a_map` says, every `b_t` as `b_map` with limbs of `N >>
/// b_log_gaps[t]` words, read periodically ([`SumGaps`]).
///
/// # Errors
/// [`Error::LaunchShape`] for mismatched maps, too many terms, or a gap
/// beyond `log N`; [`Error::Launch`].
///
/// # Safety
/// As [`binary_async`], with `b_t`'s limbs `N >> b_log_gaps[t]` words
/// long; `out` is none of the operands.
#[allow(
    clippy::too_many_arguments,
    reason = "three operands, their maps, the mode"
)]
pub unsafe fn mul_sum_async(
    kernels: &Kernels,
    stream: StreamId,
    (out, out_map): (u64, &LimbMap),
    (a, a_map): (&[u64], &LimbMap),
    (b, b_map, b_log_gaps): (&[u64], &LimbMap, &[u32]),
    accumulate: bool,
    consts: u64,
    n: u32,
) -> Result<()> {
    same_count("mul_sum", out_map, &[a_map, b_map])?;
    if b.len() != a.len() || b_log_gaps.len() != b.len() {
        return Err(Error::LaunchShape {
            kernel: "mul_sum",
            what: "second operands",
            expected: a.len(),
            found: b.len().min(b_log_gaps.len()),
        });
    }
    let mut gaps = SumGaps::default();
    for (slot, &g) in gaps.log.iter_mut().zip(b_log_gaps) {
        if g >= n.trailing_zeros() {
            return Err(Error::LaunchShape {
                kernel: "mul_sum",
                what: "log gap",
                expected: n.trailing_zeros() as usize,
                found: g as usize,
            });
        }
        *slot = g;
    }
    if a.len() > MAX_SUM_TERMS || (a.is_empty() && !accumulate) {
        return Err(Error::LaunchShape {
            kernel: "mul_sum",
            what: "products",
            expected: MAX_SUM_TERMS,
            found: a.len(),
        });
    }
    if out_map.is_empty() || a.is_empty() {
        return Ok(());
    }
    let (a_array, b_array) = (PtrArray::new(a)?, PtrArray::new(b)?);
    let terms = a.len() as u32;
    let accumulate = u32::from(accumulate);
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.mul_sum);
    launch
        .arg(&out)
        .arg(out_map)
        .arg(&a_array)
        .arg(a_map)
        .arg(&b_array)
        .arg(b_map)
        .arg(&gaps)
        .arg(&terms)
        .arg(&accumulate)
        .arg(&consts)
        .arg(&n);
    // SAFETY: PTX signature (u64, LimbMap, PtrArray, LimbMap, PtrArray,
    // LimbMap, SumGaps, u32, u32, const ModConst*, u32); as binary_async.
    unsafe { launch.launch(pair_grid(n as usize, out_map.len())) }.map_err(launched("mul_sum"))?;
    Ok(())
}

/// Queues `x = −x`.
///
/// # Errors
/// [`Error::Launch`].
///
/// # Safety
/// As [`binary_async`].
pub unsafe fn negate_async(
    kernels: &Kernels,
    stream: StreamId,
    (x, map): (u64, &LimbMap),
    consts: u64,
    n: u32,
) -> Result<()> {
    if map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.negate);
    launch.arg(&x).arg(map).arg(&consts).arg(&n);
    // SAFETY: PTX signature (u64, LimbMap, const ModConst*, u32).
    unsafe { launch.launch(pair_grid(n as usize, map.len())) }.map_err(launched("negate"))?;
    Ok(())
}

/// Queues `out = src op s_limb` (multiplication by Shoup); in place when
/// `out` and `src` are the same limbs.
///
/// # Errors
/// [`Error::LaunchShape`]; [`Error::Launch`].
///
/// # Safety
/// As [`binary_async`]; `scalars` holds one reduced scalar per limb.
#[allow(
    clippy::too_many_arguments,
    reason = "two operands, their maps, the scalars"
)]
pub unsafe fn scalar_async(
    kernels: &Kernels,
    stream: StreamId,
    op: ElementOp,
    (out, out_map): (u64, &LimbMap),
    (src, src_map): (u64, &LimbMap),
    scalars: &Scalars,
    consts: u64,
    n: u32,
) -> Result<()> {
    same_count("scalar_op", out_map, &[src_map])?;
    if out_map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.scalar_op);
    let code = op as u32;
    launch
        .arg(&out)
        .arg(out_map)
        .arg(&src)
        .arg(src_map)
        .arg(scalars)
        .arg(&consts)
        .arg(&n)
        .arg(&code);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, Scalars,
    // const ModConst*, u32, u32).
    unsafe { launch.launch(pair_grid(n as usize, out_map.len())) }
        .map_err(launched("scalar_op"))?;
    Ok(())
}

/// Queues `acc += x·s_limb` (multiplication by Shoup): relinearisation's
/// `P·d` onto the inner product in one pass.
///
/// # Errors
/// [`Error::LaunchShape`]; [`Error::Launch`].
///
/// # Safety
/// As [`binary_async`], `acc` being both output and first operand; `x`
/// must not overlap `acc` but limb for limb; `scalars` holds one reduced
/// scalar per limb.
pub unsafe fn scalar_mul_add_async(
    kernels: &Kernels,
    stream: StreamId,
    (acc, acc_map): (u64, &LimbMap),
    (x, x_map): (u64, &LimbMap),
    scalars: &Scalars,
    consts: u64,
    n: u32,
) -> Result<()> {
    same_count("scalar_mul_add", acc_map, &[x_map])?;
    if acc_map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.scalar_mul_add);
    launch
        .arg(&acc)
        .arg(acc_map)
        .arg(&x)
        .arg(x_map)
        .arg(scalars)
        .arg(&consts)
        .arg(&n);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, Scalars,
    // const ModConst*, u32).
    unsafe { launch.launch(pair_grid(n as usize, acc_map.len())) }
        .map_err(launched("scalar_mul_add"))?;
    Ok(())
}

/// Queues `out = (x − y)·s_limb`: the last step of ModDown and rescaling.
///
/// # Errors
/// [`Error::LaunchShape`]; [`Error::Launch`].
///
/// # Safety
/// As [`binary_async`].
#[allow(
    clippy::too_many_arguments,
    reason = "three operands, their maps and the scalars"
)]
pub unsafe fn sub_then_scale_async(
    kernels: &Kernels,
    stream: StreamId,
    (out, out_map): (u64, &LimbMap),
    (x, x_map): (u64, &LimbMap),
    (y, y_map): (u64, &LimbMap),
    scalars: &Scalars,
    consts: u64,
    n: u32,
) -> Result<()> {
    same_count("sub_then_scale", out_map, &[x_map, y_map])?;
    if out_map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.sub_then_scale);
    launch
        .arg(&out)
        .arg(out_map)
        .arg(&x)
        .arg(x_map)
        .arg(&y)
        .arg(y_map)
        .arg(scalars)
        .arg(&consts)
        .arg(&n);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, u64, LimbMap,
    // Scalars, const ModConst*, u32).
    unsafe { launch.launch(pair_grid(n as usize, out_map.len())) }
        .map_err(launched("sub_then_scale"))?;
    Ok(())
}

/// Queues a limb-by-limb copy.
///
/// # Errors
/// [`Error::LaunchShape`]; [`Error::Launch`].
///
/// # Safety
/// As [`binary_async`]; source and destination limbs must not overlap.
pub unsafe fn copy_async(
    kernels: &Kernels,
    stream: StreamId,
    (dst, dst_map): (u64, &LimbMap),
    (src, src_map): (u64, &LimbMap),
    n: u32,
) -> Result<()> {
    same_count("copy_limbs", dst_map, &[src_map])?;
    if dst_map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.copy_limbs);
    launch.arg(&dst).arg(dst_map).arg(&src).arg(src_map).arg(&n);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, u32).
    unsafe { launch.launch(pair_grid(n as usize, dst_map.len())) }
        .map_err(launched("copy_limbs"))?;
    Ok(())
}

/// Queues the tensor product `(a0 b0, a0 b1 + a1 b0, a1 b1)`; all seven
/// buffers share `map` (reads `32·N`, writes `24·N` bytes per limb).
///
/// # Errors
/// [`Error::Launch`].
///
/// # Safety
/// As [`binary_async`]; outputs must not alias inputs.
#[allow(
    clippy::too_many_arguments,
    reason = "the four inputs and three outputs of the tensor"
)]
pub unsafe fn tensor_async(
    kernels: &Kernels,
    stream: StreamId,
    outputs: [u64; 3],
    inputs: [u64; 4],
    map: &LimbMap,
    consts: u64,
    n: u32,
) -> Result<()> {
    if map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.tensor);
    let [d0, d1, d2] = outputs;
    let [a0, a1, b0, b1] = inputs;
    launch
        .arg(&d0)
        .arg(&d1)
        .arg(&d2)
        .arg(&a0)
        .arg(&a1)
        .arg(&b0)
        .arg(&b1)
        .arg(map)
        .arg(&consts)
        .arg(&n);
    // SAFETY: PTX signature (7 × u64, LimbMap, const ModConst*, u32).
    unsafe { launch.launch(pair_grid(n as usize, map.len())) }.map_err(launched("tensor"))?;
    Ok(())
}

/// Queues the fused key-switching inner product
/// `out0 = Σ_j digit_j·b_j`, `out1 = Σ_j digit_j·a_j` over `count` digits:
/// reads every digit and key limb once. With `galois ≠ 1` the digits are
/// read through the automorphism `X ↦ X^galois` (NTT domain, as
/// [`automorphism_async`]), a gather per digit word.
///
/// # Errors
/// [`Error::LaunchShape`]; [`Error::Launch`].
///
/// # Safety
/// As [`binary_async`], for every digit and key address through its map;
/// outputs must not alias inputs.
#[allow(
    clippy::too_many_arguments,
    reason = "digits, key halves and their maps"
)]
pub unsafe fn key_switch_inner_product_async(
    kernels: &Kernels,
    stream: StreamId,
    (out0, out1, out_map): (u64, u64, &LimbMap),
    (digits, digit_map): (&PtrArray, &LimbMap),
    (b, a, key_map): (&PtrArray, &PtrArray, &LimbMap),
    count: u32,
    consts: u64,
    n: u32,
    galois: u64,
) -> Result<()> {
    same_count("key_switch_inner_product", out_map, &[digit_map, key_map])?;
    let log_n = n.trailing_zeros();
    if out_map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.key_switch_inner_product);
    launch
        .arg(&out0)
        .arg(&out1)
        .arg(out_map)
        .arg(digits)
        .arg(digit_map)
        .arg(b)
        .arg(a)
        .arg(key_map)
        .arg(&count)
        .arg(&consts)
        .arg(&n)
        .arg(&galois)
        .arg(&log_n);
    // SAFETY: PTX signature (u64, u64, LimbMap, PtrArray, LimbMap, PtrArray,
    // PtrArray, LimbMap, u32, const ModConst*, u32, u64, u32).
    unsafe { launch.launch(pair_grid(n as usize, out_map.len())) }
        .map_err(launched("key_switch_inner_product"))?;
    Ok(())
}

/// Queues `X ↦ X^g` on NTT-form limbs: `out[j] = in[perm_g(j)]`, the
/// permutation computed in the kernel.
///
/// # Errors
/// [`Error::LaunchShape`]; [`Error::Launch`].
///
/// # Safety
/// As [`copy_async`].
pub unsafe fn automorphism_async(
    kernels: &Kernels,
    stream: StreamId,
    (out, out_map): (u64, &LimbMap),
    (input, in_map): (u64, &LimbMap),
    galois: u64,
    log_n: u32,
) -> Result<()> {
    same_count("automorphism", out_map, &[in_map])?;
    if out_map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.automorphism);
    launch
        .arg(&out)
        .arg(out_map)
        .arg(&input)
        .arg(in_map)
        .arg(&galois)
        .arg(&log_n);
    // SAFETY: PTX signature (u64, LimbMap, u64, LimbMap, u64, u32).
    unsafe { launch.launch(limb_grid(1usize << log_n, out_map.len())) }
        .map_err(launched("automorphism"))?;
    Ok(())
}
