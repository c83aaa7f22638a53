//! Diagonal matrices on slot vectors, the radix-2 stages of `E·R` and its
//! inverse, and the dense decoding matrix the tests compare with.

#![expect(
    clippy::indexing_slicing,
    reason = "butterfly and diagonal index arithmetic is modulo n by construction"
)]

use std::collections::BTreeMap;
use std::f64::consts::PI;

use num_complex::Complex64;

use crate::{Error, Result};

/// Reverses the low `bits` bits of `x`.
pub fn bit_reverse(x: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - bits)
    }
}

/// `R·v`: entry `k` of the result is `v[bitrev(k)]` (an involution).
pub fn bit_reversed<T: Copy>(v: &[T]) -> Vec<T> {
    let bits = v.len().trailing_zeros();
    (0..v.len()).map(|k| v[bit_reverse(k, bits)]).collect()
}

/// The most slots a DFT takes: any parameters' (`N/2` at the largest
/// ring). A larger one could only come from a schedule's public fields set
/// by hand, and its matrices would not fit in memory.
pub(super) use hemem_ckks::params::MAX_SLOTS;

pub(super) fn check_slots(n: usize) -> Result<()> {
    if n == 0 || !n.is_power_of_two() || n > MAX_SLOTS {
        return Err(Error::InvalidSlots {
            slots: n,
            max: MAX_SLOTS,
        });
    }
    Ok(())
}

/// A square `n × n` complex matrix on slot vectors, stored by its nonzero
/// diagonals: `diagonal[d][j] = M[j][(j + d) mod n]`, so that
/// `M·z = Σ_d diagonal[d] ⊙ rot_d(z)` with `rot_d` the left rotation by `d`.
#[derive(Clone, Debug, PartialEq)]
pub struct DiagonalMatrix {
    n: usize,
    diagonals: BTreeMap<usize, Vec<Complex64>>,
}

impl DiagonalMatrix {
    /// The zero matrix on `n` slots.
    ///
    /// # Errors
    /// [`Error::InvalidSlots`] unless `n` is a power of two.
    pub fn zero(n: usize) -> Result<Self> {
        check_slots(n)?;
        Ok(Self {
            n,
            diagonals: BTreeMap::new(),
        })
    }

    /// The identity on `n` slots.
    ///
    /// # Errors
    /// [`Error::InvalidSlots`] unless `n` is a power of two.
    pub fn identity(n: usize) -> Result<Self> {
        let mut m = Self::zero(n)?;
        m.diagonals.insert(0, vec![Complex64::new(1.0, 0.0); n]);
        Ok(m)
    }

    /// The matrix with the given diagonals (indices taken modulo `n`,
    /// repeated indices added).
    ///
    /// # Errors
    /// [`Error::InvalidSlots`], [`Error::LengthMismatch`] for a diagonal
    /// whose length is not `n`.
    pub fn from_diagonals<I>(n: usize, diagonals: I) -> Result<Self>
    where
        I: IntoIterator<Item = (i64, Vec<Complex64>)>,
    {
        let mut m = Self::zero(n)?;
        for (index, values) in diagonals {
            m.add_to_diagonal(index, &values)?;
        }
        Ok(m)
    }

    /// The matrix of a dense row-major `n × n` array (exact zero diagonals
    /// are left out).
    ///
    /// # Errors
    /// [`Error::InvalidSlots`], [`Error::LengthMismatch`] for ragged rows.
    pub fn from_dense(rows: &[Vec<Complex64>]) -> Result<Self> {
        let n = rows.len();
        let mut m = Self::zero(n)?;
        for row in rows {
            if row.len() != n {
                return Err(Error::LengthMismatch {
                    expected: n,
                    actual: row.len(),
                });
            }
        }
        for d in 0..n {
            let diag: Vec<Complex64> = (0..n).map(|j| rows[j][(j + d) % n]).collect();
            if diag.iter().any(|z| *z != Complex64::default()) {
                m.diagonals.insert(d, diag);
            }
        }
        Ok(m)
    }

    /// The slot count `n`.
    pub fn slots(&self) -> usize {
        self.n
    }

    /// The nonzero diagonals by index in `0..n`.
    pub fn diagonals(&self) -> &BTreeMap<usize, Vec<Complex64>> {
        &self.diagonals
    }

    /// The indices of the nonzero diagonals, ascending in `0..n`.
    pub fn indices(&self) -> Vec<usize> {
        self.diagonals.keys().copied().collect()
    }

    /// Adds `values` to diagonal `index` (taken modulo `n`).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `values` has `n` entries.
    pub fn add_to_diagonal(&mut self, index: i64, values: &[Complex64]) -> Result<()> {
        if values.len() != self.n {
            return Err(Error::LengthMismatch {
                expected: self.n,
                actual: values.len(),
            });
        }
        let d = index.rem_euclid(self.n as i64) as usize;
        let entry = self
            .diagonals
            .entry(d)
            .or_insert_with(|| vec![Complex64::default(); values.len()]);
        for (a, b) in entry.iter_mut().zip(values) {
            *a += b;
        }
        Ok(())
    }

    /// Multiplies every entry by `c`.
    pub fn scale(&mut self, c: Complex64) {
        for diag in self.diagonals.values_mut() {
            for z in diag.iter_mut() {
                *z *= c;
            }
        }
    }

    /// `M·z`, computed diagonal by diagonal.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `z` has `n` entries.
    pub fn apply(&self, z: &[Complex64]) -> Result<Vec<Complex64>> {
        let n = self.n;
        if z.len() != n {
            return Err(Error::LengthMismatch {
                expected: n,
                actual: z.len(),
            });
        }
        let mut out = vec![Complex64::default(); n];
        for (&d, diag) in &self.diagonals {
            for (j, o) in out.iter_mut().enumerate() {
                *o += diag[j] * z[(j + d) % n];
            }
        }
        Ok(out)
    }

    /// The product `self · first` (apply `first`, then `self`):
    /// `diag_{d1+d2}[j] += self.diag_{d1}[j] · first.diag_{d2}[j + d1]`.
    ///
    /// # Errors
    /// [`Error::SlotMismatch`] for matrices of different sizes.
    pub fn compose(&self, first: &Self) -> Result<Self> {
        if self.n != first.n {
            return Err(Error::SlotMismatch {
                left: self.n,
                right: first.n,
            });
        }
        let n = self.n;
        let mut out = Self::zero(n)?;
        for (&d1, a) in &self.diagonals {
            for (&d2, b) in &first.diagonals {
                let d = (d1 + d2) % n;
                let entry = out
                    .diagonals
                    .entry(d)
                    .or_insert_with(|| vec![Complex64::default(); n]);
                for (j, e) in entry.iter_mut().enumerate() {
                    *e += a[j] * b[(j + d1) % n];
                }
            }
        }
        out.diagonals
            .retain(|_, diag| diag.iter().any(|z| *z != Complex64::default()));
        Ok(out)
    }

    /// The dense row-major form (for tests and small sizes).
    pub fn to_dense(&self) -> Vec<Vec<Complex64>> {
        let n = self.n;
        let mut rows = vec![vec![Complex64::default(); n]; n];
        for (&d, diag) in &self.diagonals {
            for (j, row) in rows.iter_mut().enumerate() {
                row[(j + d) % n] += diag[j];
            }
        }
        rows
    }
}

/// The twiddle of stage `s` (block size `m = 2^s`): `ω_m^{5^i}`, `ω_m =
/// e^{iπ/(2m)}`, for `i < m/2`.
pub(super) fn stage_twiddles(s: u32) -> Vec<Complex64> {
    let m = 1usize << s;
    let four_m = 4 * m as u64;
    let mut power = 1u64;
    (0..m / 2)
        .map(|_| {
            let t = Complex64::from_polar(1.0, PI * power as f64 / (2 * m) as f64);
            power = power * 5 % four_m;
            t
        })
        .collect()
}

/// Stage `S_s = I_{n/2^s} ⊗ B_{2^s}` of `E·R` (or its inverse).
pub(super) fn stage(n: usize, s: u32, inverse: bool) -> Result<DiagonalMatrix> {
    let m = 1usize << s;
    let h = m / 2;
    let zeta = stage_twiddles(s);
    let zero = Complex64::default();
    let mut main = vec![zero; n];
    let mut up = vec![zero; n];
    let mut down = vec![zero; n];
    let half = Complex64::new(0.5, 0.0);
    for block in (0..n).step_by(m) {
        for (i, &z) in zeta.iter().enumerate() {
            let top = block + i;
            let bottom = top + h;
            if inverse {
                // out_top = (x_top + x_bottom)/2,
                // out_bottom = ζ̄(x_top − x_bottom)/2.
                main[top] = half;
                up[top] = half;
                down[bottom] = half * z.conj();
                main[bottom] = -half * z.conj();
            } else {
                // out_top = x_top + ζ x_bottom, out_bottom = x_top − ζ x_bottom.
                main[top] = Complex64::new(1.0, 0.0);
                up[top] = z;
                down[bottom] = Complex64::new(1.0, 0.0);
                main[bottom] = -z;
            }
        }
    }
    DiagonalMatrix::from_diagonals(n, [(0, main), (h as i64, up), (-(h as i64), down)])
}

/// The dense decoding matrix `E` on `n` slots, `E[j][k] = ω^{5^j·k}`
/// (reference for tests; `O(n²)`).
pub fn decoding_matrix(n: usize) -> Vec<Vec<Complex64>> {
    let four_n = 4 * n as u64;
    let mut power = 1u64;
    (0..n)
        .map(|_| {
            let e = power;
            power = power * 5 % four_n;
            (0..n as u64)
                .map(|k| Complex64::from_polar(1.0, PI * (e * k % four_n) as f64 / (2 * n) as f64))
                .collect()
        })
        .collect()
}
