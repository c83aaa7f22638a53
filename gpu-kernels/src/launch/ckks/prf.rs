//! Launchers of `cuda/ckks_prf.cu`: the counter-based generator of switching
//! keys' uniform halves (ChaCha with the key's rounds, keyed by its seed; the
//! spec is `hemem_ckks::sampling::SeededUniform`'s) and the key-switching
//! inner product that generates them as it goes. The generator runs one
//! thread per ChaCha block of eight coefficients (grid `(N/8/256, limbs)`),
//! the inner product one quad of threads per block, two coefficients a
//! thread (grid `(N/2/256, limbs)`).

use cudarc::driver::DeviceRepr;
use hemem_memory::StreamId;

use super::{LimbMap, PtrArray, launched, limb_grid};
use crate::launch::Launch;
use crate::{Error, Kernels, Result};

/// Coefficients per thread of the generator: one ChaCha block of eight
/// 64-bit words.
const PER_THREAD: usize = 8;

/// Coefficients per thread of the seeded inner product: a quad of threads
/// computes one block together (`chacha_quad` in `ckks_prf.cu`).
const PER_QUAD_THREAD: usize = 2;

/// The seeded inner product's degree: a multiple of 64, so that every warp
/// (eight blocks) leaves its loop together, as its shuffles need.
pub const SEEDED_DEGREE_MULTIPLE: usize = 64;

/// A key's 32-byte seed as eight little-endian words and the double rounds
/// of its ChaCha (6 for ChaCha12, 10 for ChaCha20), as `struct Seed` in
/// `ckks_prf.cu`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seed {
    /// The words.
    pub words: [u32; 8],
    /// Double rounds of the block function.
    pub double_rounds: u32,
}

impl Seed {
    /// The words of `seed`, expanded with `double_rounds` double rounds.
    pub fn new(seed: &[u8; 32], double_rounds: u32) -> Self {
        let mut words = [0u32; 8];
        for (w, bytes) in words.iter_mut().zip(seed.chunks_exact(4)) {
            if let [a, b, c, d] = *bytes {
                *w = u32::from_le_bytes([a, b, c, d]);
            }
        }
        Self {
            words,
            double_rounds,
        }
    }
}

// SAFETY: a plain-old-data `#[repr(C)]` struct of nine `u32`, laid out as
// `struct Seed` in `cuda/ckks_prf.cu` (36 bytes, checked below); passed by
// value as a kernel parameter.
unsafe impl DeviceRepr for Seed {}

/// `N` must be a positive multiple of `multiple`: eight for the generator
/// (one block per thread), [`SEEDED_DEGREE_MULTIPLE`] for the inner
/// product.
fn check_degree(kernel: &'static str, n: u32, multiple: usize) -> Result<()> {
    if n == 0 || !(n as usize).is_multiple_of(multiple) {
        return Err(Error::LaunchShape {
            kernel,
            what: "degree (a multiple of the expected value)",
            expected: multiple,
            found: n as usize,
        });
    }
    Ok(())
}

/// Queues the generation of digit `digit`'s uniform half into the limbs of
/// `map` (limb `i` modulo the prime with global index `map.modulus[i]`, and
/// generated under that index). Writes `8·N` bytes per limb, reads nothing
/// but the modulus table; about 100 integer instructions per double round
/// and eight coefficients (one ChaCha block), plus one block per rejected
/// candidate.
///
/// # Errors
/// [`Error::LaunchShape`] for a degree that is not a positive multiple of 8
/// or a digit of 2^16 or more; [`Error::Launch`].
///
/// # Safety
/// `out` must hold the limb positions of `map` (`N` words each, 16-byte
/// aligned) and be usable on `stream` until the kernel completes; `consts`
/// must cover `map`'s modulus indices; no other work may touch those limbs
/// concurrently.
#[allow(
    clippy::too_many_arguments,
    reason = "the output, the seed and the shape"
)]
pub unsafe fn uniform_from_seed_async(
    kernels: &Kernels,
    stream: StreamId,
    (out, map): (u64, &LimbMap),
    seed: &Seed,
    digit: u32,
    consts: u64,
    n: u32,
) -> Result<()> {
    check_degree("uniform_from_seed", n, PER_THREAD)?;
    check_digit("uniform_from_seed", digit)?;
    if map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(kernels, stream, &kernels.ckks.uniform_from_seed);
    launch
        .arg(&out)
        .arg(map)
        .arg(seed)
        .arg(&digit)
        .arg(&consts)
        .arg(&n);
    // SAFETY: PTX signature (u64, LimbMap, Seed, u32, const ModConst*, u32);
    // the caller guarantees the memory.
    unsafe { launch.launch(limb_grid(n as usize / PER_THREAD, map.len())) }
        .map_err(launched("uniform_from_seed"))?;
    Ok(())
}

/// Digits index the stream id's 16-bit digit field.
fn check_digit(kernel: &'static str, digit: u32) -> Result<()> {
    if digit >= 1 << 16 {
        return Err(Error::LaunchShape {
            kernel,
            what: "digit",
            expected: 1 << 16,
            found: digit as usize,
        });
    }
    Ok(())
}

/// Queues the key-switching inner product with a compressed key:
/// `out0 = Σ_j digit_j·b_j`, `out1 = Σ_j digit_j·a_j` over `count` digits,
/// where `a_j` (digit `j` of the key with `seed`) is generated in the kernel
/// and never stored. With `galois ≠ 1` the digits are read through
/// `X ↦ X^galois` as in
/// [`key_switch_inner_product_async`](super::arith::key_switch_inner_product_async).
/// Reads `16·count·N` bytes and writes `16·N` per limb (the stored-key
/// kernel reads `24·count·N`), plus one ChaCha block per digit and eight
/// coefficients, computed by four threads (80 registers a thread, three
/// blocks of 256 per SM on the H100, where one thread per block needed 196
/// and ran one).
///
/// # Errors
/// [`Error::LaunchShape`] for maps of different lengths, more than
/// [`super::MAX_DIGITS`] digits or a degree that is not a positive multiple
/// of [`SEEDED_DEGREE_MULTIPLE`]; [`Error::Launch`].
///
/// # Safety
/// Every address must hold its map's limbs (`N` words each, 16-byte aligned)
/// and be usable on `stream` until the kernel completes; `consts` must cover
/// the maps' modulus indices; outputs must not alias inputs; `galois` must be
/// odd and below `2N`.
#[allow(
    clippy::too_many_arguments,
    reason = "digits, key half, seed and their maps"
)]
pub unsafe fn key_switch_inner_product_seeded_async(
    kernels: &Kernels,
    stream: StreamId,
    (out0, out1, out_map): (u64, u64, &LimbMap),
    (digits, digit_map): (&PtrArray, &LimbMap),
    (b, key_map): (&PtrArray, &LimbMap),
    seed: &Seed,
    count: u32,
    consts: u64,
    n: u32,
    galois: u64,
) -> Result<()> {
    const KERNEL: &str = "key_switch_inner_product_seeded";
    for m in [digit_map, key_map] {
        if m.count != out_map.count {
            return Err(Error::LaunchShape {
                kernel: KERNEL,
                what: "limbs",
                expected: out_map.len(),
                found: m.len(),
            });
        }
    }
    if count == 0 || count as usize > super::MAX_DIGITS {
        return Err(Error::LaunchShape {
            kernel: KERNEL,
            what: "digits",
            expected: super::MAX_DIGITS,
            found: count as usize,
        });
    }
    check_degree(KERNEL, n, SEEDED_DEGREE_MULTIPLE)?;
    let log_n = n.trailing_zeros();
    if out_map.is_empty() {
        return Ok(());
    }
    let mut launch = Launch::new(
        kernels,
        stream,
        &kernels.ckks.key_switch_inner_product_seeded,
    );
    launch
        .arg(&out0)
        .arg(&out1)
        .arg(out_map)
        .arg(digits)
        .arg(digit_map)
        .arg(b)
        .arg(key_map)
        .arg(seed)
        .arg(&count)
        .arg(&consts)
        .arg(&n)
        .arg(&galois)
        .arg(&log_n);
    // SAFETY: PTX signature (u64, u64, LimbMap, PtrArray, LimbMap, PtrArray,
    // LimbMap, Seed, u32, const ModConst*, u32, u64, u32); the caller
    // guarantees the memory.
    unsafe { launch.launch(limb_grid(n as usize / PER_QUAD_THREAD, out_map.len())) }
        .map_err(launched(KERNEL))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_layout_matches_the_cuda_struct() {
        assert_eq!(std::mem::size_of::<Seed>(), 36);
        assert_eq!(std::mem::align_of::<Seed>(), 4);
        let mut bytes = [0u8; 32];
        bytes[0] = 1;
        bytes[5] = 2;
        bytes[31] = 0x80;
        let s = Seed::new(&bytes, 6);
        assert_eq!(s.words[0], 1);
        assert_eq!(s.words[1], 2 << 8);
        assert_eq!(s.words[7], 0x8000_0000);
        assert_eq!(s.double_rounds, 6);
    }
}
