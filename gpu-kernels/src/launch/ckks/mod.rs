//! Launchers of the CKKS kernels (`cuda/ckks_ntt.cu`, `cuda/ckks_arith.cu`,
//! `cuda/ckks_convert.cu`, `cuda/ckks_prf.cu`, `cuda/ckks_encode.cu`), and the by-value argument structs they share
//! with the CUDA code (`cuda/ckks_common.cuh`).
//!
//! Buffers are passed as raw device addresses with a [`LimbMap`] saying which
//! limbs (positions in the buffer) a launch touches and under which moduli
//! (global indices into the per-context [`ModConst`] table). The safe layer
//! is the ckks GPU backend, the only caller, which derives both from its
//! typed views.

pub mod arith;
pub mod convert;
pub mod encode;
pub mod ntt;
pub mod prf;

use cudarc::driver::{DeviceRepr, LaunchConfig};

use crate::{Error, Result};

/// Most limbs one launch maps (`HEMEM_MAX_LIMBS`).
pub const MAX_LIMBS: usize = 64;
/// Most gadget digits of one inner product (`HEMEM_MAX_DIGITS`).
pub const MAX_DIGITS: usize = 16;
/// Most source limbs of one base conversion (`HEMEM_MAX_SOURCES`).
pub const MAX_SOURCES: usize = 16;

/// Threads per block of the element-wise kernels.
const BLOCK: u32 = 256;

/// Constants of one modulus, as `struct ModConst` in `ckks_common.cuh`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModConst {
    /// The prime q.
    pub q: u64,
    /// `floor(2^(2b) / q)` for the one-word Barrett product reduction.
    pub mu: u64,
    /// `floor(2^128 / q)`, low word.
    pub ratio_lo: u64,
    /// `floor(2^128 / q)`, high word.
    pub ratio_hi: u64,
    /// The bit length b of q.
    pub bits: u32,
    /// Padding to 8 bytes.
    pub pad: u32,
}

impl ModConst {
    /// The constants of `q` (`2 ≤ q < 2^62`).
    pub fn new(q: u64) -> Self {
        let bits = 64 - q.leading_zeros();
        let mu = ((1u128 << (2 * bits)) / u128::from(q.max(1))) as u64;
        let ratio = u128::MAX / u128::from(q.max(1)) + u128::from(q.is_power_of_two());
        Self {
            q,
            mu,
            ratio_lo: ratio as u64,
            ratio_hi: (ratio >> 64) as u64,
            bits,
            pad: 0,
        }
    }
}

/// Which limbs of a buffer a launch touches, as `struct LimbMap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimbMap {
    /// Limbs in the map.
    pub count: u32,
    /// Position of each limb in its buffer.
    pub position: [u16; MAX_LIMBS],
    /// Global modulus index of each limb.
    pub modulus: [u16; MAX_LIMBS],
}

impl LimbMap {
    /// A map from limb positions and modulus indices.
    ///
    /// # Errors
    /// [`Error::LaunchShape`] for more than [`MAX_LIMBS`] limbs, different
    /// lengths, or an index beyond `u16`.
    pub fn new(positions: &[usize], moduli: &[usize]) -> Result<Self> {
        let shape = |what, expected, found| Error::LaunchShape {
            kernel: "limb map",
            what,
            expected,
            found,
        };
        if positions.len() != moduli.len() {
            return Err(shape("positions", moduli.len(), positions.len()));
        }
        if positions.len() > MAX_LIMBS {
            return Err(shape("limbs", MAX_LIMBS, positions.len()));
        }
        let mut map = Self {
            count: positions.len() as u32,
            position: [0; MAX_LIMBS],
            modulus: [0; MAX_LIMBS],
        };
        for ((slot, m), (&p, &q)) in map
            .position
            .iter_mut()
            .zip(map.modulus.iter_mut())
            .zip(positions.iter().zip(moduli))
        {
            *slot =
                u16::try_from(p).map_err(|_| shape("limb position", usize::from(u16::MAX), p))?;
            *m = u16::try_from(q).map_err(|_| shape("modulus index", usize::from(u16::MAX), q))?;
        }
        Ok(map)
    }

    /// Limbs in the map.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Device addresses of up to [`MAX_DIGITS`] buffers, as `struct PtrArray`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtrArray {
    /// The addresses.
    pub ptr: [u64; MAX_DIGITS],
}

impl PtrArray {
    /// An array from addresses.
    ///
    /// # Errors
    /// [`Error::LaunchShape`] beyond [`MAX_DIGITS`].
    pub fn new(addresses: &[u64]) -> Result<Self> {
        if addresses.len() > MAX_DIGITS {
            return Err(Error::LaunchShape {
                kernel: "pointer array",
                what: "digits",
                expected: MAX_DIGITS,
                found: addresses.len(),
            });
        }
        let mut a = Self::default();
        for (slot, &p) in a.ptr.iter_mut().zip(addresses) {
            *slot = p;
        }
        Ok(a)
    }
}

/// One scalar per limb with its Shoup quotient, as `struct Scalars`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scalars {
    /// The scalars (reduced).
    pub value: [u64; MAX_LIMBS],
    /// `floor(value · 2^64 / q)` (used by multiplications).
    pub shoup: [u64; MAX_LIMBS],
}

impl Scalars {
    /// Scalars from `(value, shoup)` pairs.
    ///
    /// # Errors
    /// [`Error::LaunchShape`] beyond [`MAX_LIMBS`].
    pub fn new(pairs: &[(u64, u64)]) -> Result<Self> {
        if pairs.len() > MAX_LIMBS {
            return Err(Error::LaunchShape {
                kernel: "scalars",
                what: "limbs",
                expected: MAX_LIMBS,
                found: pairs.len(),
            });
        }
        let mut s = Self {
            value: [0; MAX_LIMBS],
            shoup: [0; MAX_LIMBS],
        };
        for ((v, w), &(a, b)) in s.value.iter_mut().zip(s.shoup.iter_mut()).zip(pairs) {
            *v = a;
            *w = b;
        }
        Ok(s)
    }
}

// SAFETY: plain-old-data structs with `#[repr(C)]` layouts identical to
// their CUDA counterparts in `cuda/ckks_common.cuh` and `ckks_arith.cu`
// (checked by the size test below); passed by value as kernel parameters.
unsafe impl DeviceRepr for ModConst {}
// SAFETY: as above.
unsafe impl DeviceRepr for LimbMap {}
// SAFETY: as above.
unsafe impl DeviceRepr for PtrArray {}
// SAFETY: as above.
unsafe impl DeviceRepr for Scalars {}

/// Operation codes of `binary_op` and `scalar_op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ElementOp {
    /// `a + b`.
    Add = 0,
    /// `a − b`.
    Sub = 1,
    /// `a · b`.
    Mul = 2,
}

/// A grid of `limbs` rows, each covering `n` coefficients with [`BLOCK`]
/// threads per block.
fn limb_grid(n: usize, limbs: usize) -> LaunchConfig {
    let blocks = n.div_ceil(BLOCK as usize).clamp(1, 65_535) as u32;
    LaunchConfig {
        grid_dim: (blocks, limbs.max(1) as u32, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A grid of `limbs` rows, each covering `n` coefficients two per thread
/// (16-byte accesses) with [`BLOCK`] threads per block.
fn pair_grid(n: usize, limbs: usize) -> LaunchConfig {
    limb_grid(n.div_ceil(2), limbs)
}

fn launched(kernel: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
    move |error| Error::Launch { kernel, error }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_cuda_structs() {
        assert_eq!(std::mem::size_of::<ModConst>(), 40);
        assert_eq!(std::mem::size_of::<LimbMap>(), 260);
        assert_eq!(std::mem::size_of::<PtrArray>(), 128);
        assert_eq!(std::mem::size_of::<Scalars>(), 1024);
        let m = ModConst::new(4_398_044_938_241);
        assert_eq!(m.bits, 42);
        assert_eq!(u128::from(m.mu), (1u128 << 84) / 4_398_044_938_241);
        let map = LimbMap::new(&[0, 1, 7], &[0, 1, 30]).unwrap();
        assert_eq!(map.len(), 3);
        assert!(LimbMap::new(&[0; 65], &[0; 65]).is_err());
        assert!(PtrArray::new(&[0; 17]).is_err());
    }
}
