//! [`SlotArithmetic`]: the slot-level operations bootstrapping's algorithms
//! are written against, and [`PlainSimulator`], an exact f64 model of them.
//!
//! The homomorphic DFTs ([`crate::dft`]), linear transforms
//! ([`crate::linear_transform`]), polynomial evaluation
//! ([`crate::poly_eval`]) and EvalMod ([`crate::eval_mod`]) only ever call
//! these methods, so the same code runs on ciphertexts ([`crate::CkksOps`])
//! and on the simulator, where its precision can be measured without keys.
//!
//! The semantics follow hemem-ckks: a value carries a level `l` (primes
//! `q_0 … q_l` present) and an exact f64 scale; additions need equal levels
//! and scales (relative `2^-40`); multiplications never rescale implicitly;
//! `rescale` divides the scale by `q_l` in f64; constants are rounded to
//! integers at the scale they are given; rotation by `k` is the Galois
//! element `5^k mod 2N`, a left rotation of the slots.
//!
//! This module holds the trait; [`PlainSimulator`] (with its values,
//! plaintexts, counters and rescale rule) is in `simulator/`, the
//! [`NoiseModel`] it injects in `noise.rs`.

mod noise;
mod simulator;

use hemem_ckks::params::Scale;
use num_complex::Complex64;

use crate::Result;

pub use noise::NoiseModel;
pub use simulator::{OpCounts, PlainSimulator, RescaleRule, SimPlain, SimValue};

/// The slot-level operations of CKKS that bootstrapping needs.
///
/// `Value` is a ciphertext, `Plain` an encoded plaintext (a linear
/// transform's diagonal). No method rescales implicitly: products carry the
/// product of the scales until [`SlotArithmetic::rescale`].
pub trait SlotArithmetic {
    /// A ciphertext (or its simulation).
    type Value;
    /// An encoded plaintext (or its simulation).
    type Plain;
    /// A sum of ciphertext products not yet relinearised (or its
    /// simulation).
    type Tensored;
    /// A plaintext kept compactly between uses and expanded to a
    /// [`SlotArithmetic::Plain`] when used (a linear transform's diagonal
    /// under [`crate::linear_transform::DiagonalStorage::Compact`]).
    type Compact;

    /// The slot count of `x`.
    fn slots(&self, x: &Self::Value) -> usize;
    /// Bytes of one limb of an encoded plaintext (`8·N`): what sizes a
    /// diagonal kept encoded.
    fn limb_bytes(&self) -> u64;
    /// The level of `x`: primes `q_0 … q_level` are present.
    fn level(&self, x: &Self::Value) -> usize;
    /// The exact scale of `x`.
    fn scale(&self, x: &Self::Value) -> f64;
    /// The prime `q_level`.
    ///
    /// # Errors
    /// A level beyond the chain.
    fn prime(&self, level: usize) -> Result<u64>;

    /// `a + b`; needs equal levels, slot counts and scales (relative `2^-40`).
    ///
    /// # Errors
    /// Mismatched level, slots or scale.
    fn add(&self, a: &Self::Value, b: &Self::Value) -> Result<Self::Value>;
    /// `a − b`; as [`SlotArithmetic::add`].
    ///
    /// # Errors
    /// Mismatched level, slots or scale.
    fn sub(&self, a: &Self::Value, b: &Self::Value) -> Result<Self::Value>;
    /// Tensor product and relinearisation, no rescale: both at the same
    /// level, result scale `sa·sb`.
    ///
    /// # Errors
    /// Mismatched level or slots; a missing relinearisation key.
    fn mul_relin(&self, a: &Self::Value, b: &Self::Value) -> Result<Self::Value>;
    /// `acc += a·b` without relinearisation (`acc` set when empty): both
    /// at one level, result scale `sa·sb`; every product added to one
    /// `acc` at one level and scale (relative `2^-40`). With
    /// [`SlotArithmetic::relinearize_sum`], lazy relinearisation: one key
    /// switch for a sum of products instead of one per product, and its
    /// noise once; the factors can be dropped as soon as their product is
    /// added.
    ///
    /// # Errors
    /// Mismatched level, slots or scale.
    fn tensor_add(
        &self,
        acc: &mut Option<Self::Tensored>,
        a: &Self::Value,
        b: &Self::Value,
    ) -> Result<()>;
    /// Relinearises a sum of products ([`SlotArithmetic::tensor_add`])
    /// plus `addend` (at its level and scale), no rescale.
    ///
    /// # Errors
    /// A mismatched addend; a missing relinearisation key.
    fn relinearize_sum(
        &self,
        sum: Self::Tensored,
        addend: Option<&Self::Value>,
    ) -> Result<Self::Value>;
    /// [`SlotArithmetic::relinearize_sum`] then [`SlotArithmetic::rescale`]
    /// (the default); real ciphertexts do both in one ModDown, dividing by
    /// `P·q_level` ([`hemem_ckks::eval::Evaluator::relinearize_rescale_with`]):
    /// the same value, rounded once instead of twice. [`product_rescaled`]
    /// is one product through it.
    ///
    /// # Errors
    /// As [`SlotArithmetic::relinearize_sum`] and [`SlotArithmetic::rescale`].
    fn relinearize_sum_rescale(
        &self,
        sum: Self::Tensored,
        addend: Option<&Self::Value>,
    ) -> Result<Self::Value> {
        let relinearized = self.relinearize_sum(sum, addend)?;
        self.rescale(&relinearized)
    }
    /// Divides by `q_level`: level − 1, scale `s / q_level` (f64).
    ///
    /// # Errors
    /// Level 0; hemem's rescale rule (see [`RescaleRule`]).
    fn rescale(&self, a: &Self::Value) -> Result<Self::Value>;
    /// Multiplies by the integer constant `round(c·const_scale)` (the
    /// imaginary part through `X^{N/2}`), no rescale: scale `sa·const_scale`.
    ///
    /// # Errors
    /// A non-finite constant or scale.
    fn mul_const(&self, a: &Self::Value, c: Complex64, const_scale: f64) -> Result<Self::Value>;
    /// [`SlotArithmetic::mul_const`] of `a` brought down to `level` (by
    /// default [`at_level`] then the product; real ciphertexts read only
    /// the kept primes, in one pass).
    ///
    /// # Errors
    /// As [`SlotArithmetic::level_down`] and [`SlotArithmetic::mul_const`].
    fn mul_const_at_level(
        &self,
        a: &Self::Value,
        c: Complex64,
        const_scale: f64,
        level: usize,
    ) -> Result<Self::Value> {
        let low = at_level(self, a, level)?;
        self.mul_const(&low, c, const_scale)
    }
    /// Adds `round(c·sa)` (the imaginary part through `X^{N/2}`): adds `c`
    /// to every slot, up to that rounding.
    ///
    /// # Errors
    /// A non-finite constant.
    fn add_const(&self, a: &Self::Value, c: Complex64) -> Result<Self::Value>;
    /// Multiplies by the integer `k`, exactly; the scale is unchanged.
    ///
    /// # Errors
    /// Backend errors only.
    fn mul_integer(&self, a: &Self::Value, k: i64) -> Result<Self::Value>;
    /// Drops primes down to `level`, keeping the scale exactly.
    ///
    /// # Errors
    /// A level above the operand's.
    fn level_down(&self, a: &Self::Value, level: usize) -> Result<Self::Value>;
    /// Encodes `values` (exactly `slots` of them) at `level` and `scale`.
    ///
    /// # Errors
    /// Bad slot count, level, scale or non-finite values.
    fn encode(&self, values: &[Complex64], level: usize, scale: f64) -> Result<Self::Plain>;
    /// Multiplies by a plaintext at the same level, no rescale: scale `sa·sp`.
    ///
    /// # Errors
    /// Mismatched level or slots.
    fn mul_plain(&self, a: &Self::Value, p: &Self::Plain) -> Result<Self::Value>;
    /// Encodes as [`SlotArithmetic::encode`] into the compact form.
    ///
    /// # Errors
    /// As [`SlotArithmetic::encode`].
    fn encode_compact(
        &self,
        values: &[Complex64],
        level: usize,
        scale: f64,
    ) -> Result<Self::Compact>;
    /// The plaintexts of compact encodings, in order: each equal to what
    /// [`SlotArithmetic::encode`] makes from the same values (short-lived
    /// scratch on real ciphertexts).
    ///
    /// # Errors
    /// Backend and allocation errors.
    fn expand(&self, compact: &[&Self::Compact]) -> Result<Vec<Self::Plain>>;

    /// `acc += b` in place (by default through [`SlotArithmetic::add`]).
    ///
    /// # Errors
    /// As [`SlotArithmetic::add`].
    fn add_assign(&self, acc: &mut Self::Value, b: &Self::Value) -> Result<()> {
        *acc = self.add(acc, b)?;
        Ok(())
    }

    /// `acc += a·p` in place, `acc` at `a`'s scale times `p`'s (by default
    /// through [`SlotArithmetic::mul_plain`] and [`SlotArithmetic::add`]).
    ///
    /// # Errors
    /// As [`SlotArithmetic::mul_plain`] and [`SlotArithmetic::add`].
    fn mul_plain_add_assign(
        &self,
        acc: &mut Self::Value,
        a: &Self::Value,
        p: &Self::Plain,
    ) -> Result<()> {
        let term = self.mul_plain(a, p)?;
        self.add_assign(acc, &term)
    }

    /// `Σ_t a_t·p_t` without rescaling, added into `acc` when it holds a
    /// value (at every product's scale) and made otherwise: a linear
    /// transform's inner sum. The default takes one
    /// [`SlotArithmetic::mul_plain`] or
    /// [`SlotArithmetic::mul_plain_add_assign`] per term; real ciphertexts
    /// read each operand once ([`hemem_ckks::eval::Evaluator::mult_plain_sum`]).
    ///
    /// # Errors
    /// As [`SlotArithmetic::mul_plain_add_assign`].
    fn mul_plain_sum(
        &self,
        acc: &mut Option<Self::Value>,
        terms: &[(&Self::Value, &Self::Plain)],
    ) -> Result<()> {
        sum_term_by_term(
            acc,
            terms,
            |a, p| self.mul_plain(a, p),
            |sum, a, p| self.mul_plain_add_assign(sum, a, p),
        )
    }
    /// Rotates the slots left by `steps` (negative: right); Galois element
    /// `5^steps mod 2N`.
    ///
    /// # Errors
    /// A missing rotation key.
    fn rotate(&self, a: &Self::Value, steps: i64) -> Result<Self::Value>;
    /// Several rotations of one value sharing one key-switch decomposition
    /// (hoisting, Halevi–Shoup 2018); the result follows `steps`' order.
    ///
    /// # Errors
    /// A missing rotation key.
    fn rotate_hoisted(&self, a: &Self::Value, steps: &[i64]) -> Result<Vec<Self::Value>>;
    /// Complex conjugation of every slot (Galois element `2N − 1`).
    ///
    /// # Errors
    /// A missing conjugation key.
    fn conjugate(&self, a: &Self::Value) -> Result<Self::Value>;
    /// Relabels the scale of `a` without touching its plaintext: the slot
    /// values are multiplied by `old/new`. Bootstrapping needs it twice: to
    /// read the ModRaised plaintext at scale `q_0`, and to give the result
    /// the post-bootstrap default scale (`S_x → Δ_post`).
    ///
    /// # Errors
    /// A non-finite or non-positive scale.
    fn set_scale(&self, a: &Self::Value, scale: f64) -> Result<Self::Value>;
}

/// `a·b + addend` relinearised and rescaled in one step
/// ([`SlotArithmetic::relinearize_sum_rescale`]), `a` dropped once the
/// product is formed: a factor made only for this product (a power doubled
/// for a Chebyshev recurrence) is not held through the key switch, the
/// peak of the operation's memory.
///
/// # Errors
/// As [`SlotArithmetic::tensor_add`] and
/// [`SlotArithmetic::relinearize_sum_rescale`].
pub fn product_rescaled<A: SlotArithmetic + ?Sized>(
    ops: &A,
    a: AtLevel<'_, A::Value>,
    b: &A::Value,
    addend: Option<&A::Value>,
) -> Result<A::Value> {
    let mut product = None;
    ops.tensor_add(&mut product, &a, b)?;
    drop(a);
    let product = product.ok_or(crate::Error::InvalidParameter {
        name: "product",
        reason: "no tensor",
    })?;
    ops.relinearize_sum_rescale(product, addend)
}

/// `Σ_t a_t·p_t` one term at a time, added into `acc` when it holds a
/// value: `mul` makes the first product, `mul_add` adds each other one.
///
/// # Errors
/// What `mul` and `mul_add` return.
pub(crate) fn sum_term_by_term<V, P>(
    acc: &mut Option<V>,
    terms: &[(&V, &P)],
    mul: impl Fn(&V, &P) -> Result<V>,
    mul_add: impl Fn(&mut V, &V, &P) -> Result<()>,
) -> Result<()> {
    for &(a, p) in terms {
        match acc.as_mut() {
            None => *acc = Some(mul(a, p)?),
            Some(sum) => mul_add(sum, a, p)?,
        }
    }
    Ok(())
}

/// A value at a wanted level: the value itself where it is there already,
/// else [`SlotArithmetic::level_down`]'s copy (on a GPU a copy of every limb
/// of both polynomials, which a value already at the level does not need).
#[derive(Debug)]
pub enum AtLevel<'a, V> {
    /// The value, already at the level.
    Same(&'a V),
    /// A copy brought down to the level.
    Lower(V),
}

impl<V> std::ops::Deref for AtLevel<'_, V> {
    type Target = V;
    fn deref(&self) -> &V {
        match self {
            Self::Same(v) => v,
            Self::Lower(v) => v,
        }
    }
}

/// `a` at `level` ([`AtLevel`]): borrowed where it is there, brought down
/// otherwise.
///
/// # Errors
/// As [`SlotArithmetic::level_down`] (a level above `a`'s).
pub fn at_level<'a, A: SlotArithmetic + ?Sized>(
    ops: &A,
    a: &'a A::Value,
    level: usize,
) -> Result<AtLevel<'a, A::Value>> {
    if ops.level(a) == level {
        Ok(AtLevel::Same(a))
    } else {
        ops.level_down(a, level).map(AtLevel::Lower)
    }
}

/// Whether two scales agree as additions require (relative `2^-40`), as
/// [`Scale::matches`].
pub fn scales_match(a: f64, b: f64) -> bool {
    Scale(a).matches(Scale(b))
}
