//! Homomorphic polynomial evaluation in the Chebyshev or monomial basis:
//! baby-step giant-step Paterson–Stockmeyer, level-optimal and
//! scale-aware, after Bossuat–Mouchet–Troncoso-Pastoriza–Hubaux (ePrint
//! 2020/1203 §4.2, Algorithms 1–2) and Lee et al. (ePrint 2020/552 §3).
//!
//! # Algorithm
//!
//! A polynomial of degree `d` is split recursively as `p = q·T_{2^k} + r`
//! with `2^k ≤ d` the largest power of two (Chebyshev division uses
//! `T_i·T_{2^k} = ½(T_{i+2^k} + T_{|i−2^k|})`; monomial division is a
//! split of the coefficient list). Each call carries a **depth budget**:
//! the result must appear `budget` levels below the input. The quotient
//! gets `budget − 1` (it is multiplied once more), the remainder keeps
//! `budget`. A part of degree below the baby-step size `2^l` becomes a
//! **leaf** `Σ c_i T_i` (one constant multiplication per term, one rescale)
//! when its deepest `T_i` leaves a level for the constants; otherwise it is
//! split again. Giants (`T_{2^k}`) and babies (`T_1 … T_{2^l − 1}`) are
//! computed on demand at the optimal depth `⌈log2 i⌉`. With the budget
//! `⌈log2(d + 1)⌉` this always succeeds, so the evaluation is
//! level-optimal.
//!
//! **Scales.** Every call also carries the exact scale its result must
//! have. A leaf at target `t` multiplies `T_i` (scale `σ_i`) by its
//! coefficient encoded at scale `t·q/σ_i`, `q` the prime it rescales by; a
//! product node asks its quotient for `t·q/σ_G` (`σ_G` the giant's scale),
//! so that after the tensor and the rescale it lands on `t` too. Sums
//! therefore always meet equal scales (to within f64 rounding), and the
//! result carries the requested scale: the caller chooses it, e.g. the
//! scale the next stage wants.
//!
//! `T_{a+b} = 2·T_a·T_b − T_{a−b}` needs `T_{a−b}` at the product's scale
//! before the rescale; it is brought there by a multiplication by the
//! constant 1 encoded at the ratio of the scales (no level). Inputs should
//! carry a scale close to the primes they are rescaled by, or the powers'
//! scales drift.

use std::collections::HashMap;

use hemem_ckks::eval::{Ciphertext, Evaluator};
use hemem_ckks::params::{Level, Scale};
use hemem_memory::MemoryClass;
use num_complex::Complex64;

use crate::approx::chebyshev;
use crate::arith::{AtLevel, SlotArithmetic, at_level, product_rescaled};
use crate::ckks_ops::CkksOps;
use crate::{Error, Result};

/// The basis of a [`Polynomial`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Basis {
    /// `Σ c_i x^i`.
    Monomial,
    /// `Σ c_i T_i(t)`, `t = (2x − a − b)/(b − a)` for `x ∈ [a, b]`.
    Chebyshev {
        /// Left end of the interval.
        a: f64,
        /// Right end of the interval.
        b: f64,
    },
}

/// A polynomial with real coefficients in a [`Basis`].
#[derive(Clone, Debug, PartialEq)]
pub struct Polynomial {
    basis: Basis,
    coefficients: Vec<f64>,
}

/// `⌈log2(d + 1)⌉`: the multiplicative depth of a degree-`d` polynomial.
pub fn depth_for_degree(degree: usize) -> usize {
    (usize::BITS - degree.leading_zeros()) as usize
}

impl Polynomial {
    /// `Σ c_i x^i`.
    ///
    /// # Errors
    /// [`Error::NonFinite`] for a non-finite coefficient.
    pub fn monomial(coefficients: Vec<f64>) -> Result<Self> {
        Self::new(Basis::Monomial, coefficients)
    }

    /// `Σ c_i T_i` on `[a, b]`.
    ///
    /// # Errors
    /// [`Error::InvalidInterval`], [`Error::NonFinite`].
    pub fn chebyshev(a: f64, b: f64, coefficients: Vec<f64>) -> Result<Self> {
        Self::new(Basis::Chebyshev { a, b }, coefficients)
    }

    /// A polynomial in `basis`.
    ///
    /// # Errors
    /// [`Error::InvalidInterval`] for a Chebyshev interval with `a >= b`
    /// or a width `b − a` that is not finite (its map to `[−1, 1]` would
    /// send every input to 0), [`Error::NonFinite`] for a non-finite
    /// coefficient.
    pub fn new(basis: Basis, coefficients: Vec<f64>) -> Result<Self> {
        if let Basis::Chebyshev { a, b } = basis
            && !(a.is_finite() && b.is_finite() && a < b && (b - a).is_finite())
        {
            return Err(Error::InvalidInterval { a, b });
        }
        if coefficients.iter().any(|c| !c.is_finite()) {
            return Err(Error::NonFinite);
        }
        Ok(Self {
            basis,
            coefficients,
        })
    }

    /// The basis.
    pub fn basis(&self) -> Basis {
        self.basis
    }

    /// The coefficients, lowest first.
    pub fn coefficients(&self) -> &[f64] {
        &self.coefficients
    }

    /// The degree: the index of the last nonzero coefficient (0 for a
    /// constant or empty polynomial).
    pub fn degree(&self) -> usize {
        degree_of(&self.coefficients).unwrap_or(0)
    }

    /// Levels [`evaluate`] consumes: `⌈log2(d + 1)⌉`, plus one when a
    /// Chebyshev interval needs a non-integer affine map to `[−1, 1]`.
    pub fn depth(&self) -> usize {
        depth_for_degree(self.degree()) + usize::from(self.affine_map().needs_level())
    }

    /// The value at `x` in f64 (Clenshaw or Horner).
    pub fn evaluate_f64(&self, x: f64) -> f64 {
        match self.basis {
            Basis::Monomial => self
                .coefficients
                .iter()
                .rev()
                .fold(0.0, |acc, &c| acc * x + c),
            Basis::Chebyshev { a, b } => chebyshev::evaluate(&self.coefficients, a, b, x),
        }
    }

    fn affine_map(&self) -> AffineMap {
        match self.basis {
            Basis::Monomial => AffineMap {
                alpha: 1.0,
                beta: 0.0,
            },
            Basis::Chebyshev { a, b } => AffineMap {
                alpha: 2.0 / (b - a),
                beta: -(a + b) / (b - a),
            },
        }
    }
}

/// `t = α·x + β`.
#[derive(Clone, Copy, Debug)]
struct AffineMap {
    alpha: f64,
    beta: f64,
}

impl AffineMap {
    fn integer_alpha(&self) -> Option<i64> {
        (self.alpha.fract() == 0.0 && self.alpha.abs() < 2f64.powi(31)).then_some(self.alpha as i64)
    }

    fn needs_level(&self) -> bool {
        self.integer_alpha().is_none()
    }
}

fn degree_of(c: &[f64]) -> Option<usize> {
    c.iter().rposition(|&v| v != 0.0)
}

fn ceil_log2(i: usize) -> usize {
    if i <= 1 { 0 } else { depth_for_degree(i - 1) }
}

/// Evaluates `poly` at the slots of `x` so that the result carries exactly
/// `target_scale` (relative `2^-40`, f64 rounding) at level
/// `level(x) − poly.depth()`.
///
/// # Errors
/// [`Error::InvalidDegree`] for a constant polynomial,
/// [`Error::NonFinite`] for a bad target scale,
/// [`Error::LevelTooLow`] when `x` has fewer levels than the depth, and the
/// errors of `ops`.
pub fn evaluate<A: SlotArithmetic>(
    ops: &A,
    x: &A::Value,
    poly: &Polynomial,
    target_scale: f64,
) -> Result<A::Value> {
    if !(target_scale.is_finite() && target_scale > 0.0) {
        return Err(Error::NonFinite);
    }
    let degree = degree_of(&poly.coefficients).unwrap_or(0);
    if degree == 0 {
        return Err(Error::InvalidDegree { degree });
    }
    let depth = poly.depth();
    let level = ops.level(x);
    if level < depth {
        return Err(Error::LevelTooLow {
            operation: "polynomial evaluation",
            needed: depth,
            level,
        });
    }
    let t = apply_affine(ops, x, poly.affine_map())?;
    let log_degree = depth_for_degree(degree);
    let mut ev = PowerBasis {
        ops,
        chebyshev: matches!(poly.basis, Basis::Chebyshev { .. }),
        top: ops.level(&t),
        baby: 1usize << (log_degree / 2).max(1),
        powers: HashMap::new(),
    };
    ev.powers.insert(1, t);
    let coefficients = poly.coefficients.get(..=degree).unwrap_or(&[]);
    match ev.eval(coefficients, log_degree, target_scale)? {
        Node::Value(v) => Ok(v),
        Node::Const(_) => Err(Error::InvalidDegree { degree }),
    }
}

/// Polynomial evaluation as an operation of hemem-ckks's [`Evaluator`]
/// (this crate sits above hemem-ckks, so the operation is an extension
/// trait; `hemem::prelude` brings it into scope).
///
/// ```
/// use std::sync::Arc;
///
/// use hemem_bootstrap::poly_eval::{EvaluatePolynomial, Polynomial};
/// use hemem_ckks::prelude::*;
/// use num_complex::Complex64;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)?;
/// let context = Context::new(params.clone(), DeviceSelection::Cpu)?;
/// let keygen = KeyGenerator::new(&context)?;
/// let secret = keygen.secret_key()?;
/// let keys = keygen.key_set(&secret, &KeySetRequest { relinearization: true, ..Default::default() })?;
/// let evaluator = Evaluator::with_keys(&context, Arc::new(keys));
/// let encoder = Encoder::new(&context);
/// let x = [Complex64::new(0.5, 0.0), Complex64::new(-0.25, 0.0)];
/// let ct = Encryptor::new(&context)?.encrypt(&encoder.encode(&x)?, &keygen.public_key(&secret)?)?;
///
/// // x³ − x/2: two levels, the default scale of the level it lands on.
/// let p = Polynomial::monomial(vec![0.0, -0.5, 0.0, 1.0])?;
/// let y = evaluator.evaluate_polynomial(&ct, &p)?;
/// assert_eq!(y.level().get(), ct.level().get() - 2);
/// assert_eq!(y.scale(), params.default_scale(y.level())?);
/// let out = encoder.decode(&Decryptor::new(&context).decrypt(&y, &secret)?)?;
/// assert!((out[0].re - p.evaluate_f64(0.5)).abs() < 1e-6);
/// # Ok(())
/// # }
/// ```
pub trait EvaluatePolynomial {
    /// `poly` at every slot of `x`, [`Polynomial::depth`] levels below `x`,
    /// at that level's default scale, so that the result adds to and
    /// multiplies with other default-scale ciphertexts directly. The
    /// evaluator needs the relinearisation key (for degree 2 and up).
    ///
    /// # Errors
    /// As [`EvaluatePolynomial::evaluate_polynomial_at_scale`].
    fn evaluate_polynomial(&self, x: &Ciphertext, poly: &Polynomial) -> Result<Ciphertext>;

    /// `poly` at every slot of `x`, landing exactly on `scale` (relative
    /// `2^-40`) [`Polynomial::depth`] levels below `x`.
    ///
    /// # Errors
    /// [`Error::InvalidDegree`] for a constant polynomial;
    /// [`Error::LevelTooLow`] when `x` has fewer levels than the depth;
    /// [`Error::NonFinite`] for a bad scale;
    /// [`hemem_ckks::OperandError::ScaleOverflow`] (through
    /// [`Error::Ckks`]) when the last rescale would leave a scale above
    /// twice its prime, as [`Evaluator::rescale`] refuses; and the
    /// evaluator's errors (a missing relinearisation key, mismatched
    /// contexts).
    fn evaluate_polynomial_at_scale(
        &self,
        x: &Ciphertext,
        poly: &Polynomial,
        scale: Scale,
    ) -> Result<Ciphertext>;
}

impl EvaluatePolynomial for Evaluator {
    fn evaluate_polynomial(&self, x: &Ciphertext, poly: &Polynomial) -> Result<Ciphertext> {
        let depth = poly.depth();
        let level = x.level().get();
        let out = level.checked_sub(depth).ok_or(Error::LevelTooLow {
            operation: "polynomial evaluation",
            needed: depth,
            level,
        })?;
        let scale = self.context().params().default_scale(Level(out))?;
        self.evaluate_polynomial_at_scale(x, poly, scale)
    }

    fn evaluate_polynomial_at_scale(
        &self,
        x: &Ciphertext,
        poly: &Polynomial,
        scale: Scale,
    ) -> Result<Ciphertext> {
        self.context().check_same(x.context())?;
        let depth = poly.depth();
        let level = x.level().get();
        if let Some(out) = level.checked_sub(depth)
            && depth > 0
            && scale.0.is_finite()
            && scale.0 > 0.0
        {
            // The result's scale must fit its level (checked first, so that
            // the error names the scale asked for); the evaluation's last
            // rescale divides by q_{out+1}: the user rule of
            // `Evaluator::rescale` applies to it.
            self.context().params().check_scale(Level(out), scale)?;
            let last = Level(out + 1);
            let q = self.context().params().q_modulus(last)?.value() as f64;
            self.context()
                .params()
                .check_rescale(last, Scale(scale.0 * q))?;
        }
        // The polynomial's constants are multiplied in as scalars; anything
        // encoded would be this call's own plaintext memory.
        let ops = CkksOps::new(self).with_constant_class(MemoryClass::Plaintext);
        evaluate(&ops, x, poly, scale.0)
    }
}

fn apply_affine<A: SlotArithmetic>(ops: &A, x: &A::Value, map: AffineMap) -> Result<A::Value> {
    let scaled = match map.integer_alpha() {
        Some(1) => ops.level_down(x, ops.level(x))?,
        Some(k) => ops.mul_integer(x, k)?,
        None => {
            let q = ops.prime(ops.level(x))? as f64;
            let m = ops.mul_const(x, Complex64::new(map.alpha, 0.0), q)?;
            ops.rescale(&m)?
        }
    };
    if map.beta == 0.0 {
        Ok(scaled)
    } else {
        ops.add_const(&scaled, Complex64::new(map.beta, 0.0))
    }
}

/// A partial result: a constant (no ciphertext needed) or a value.
enum Node<V> {
    Const(f64),
    Value(V),
}

/// The power basis `T_i` (or `x^i`), computed on demand at level
/// `top − ⌈log2 i⌉`.
struct PowerBasis<'a, A: SlotArithmetic> {
    ops: &'a A,
    chebyshev: bool,
    top: usize,
    baby: usize,
    powers: HashMap<usize, A::Value>,
}

impl<A: SlotArithmetic> PowerBasis<'_, A> {
    fn get(&self, i: usize) -> Result<&A::Value> {
        self.powers.get(&i).ok_or(Error::InvalidParameter {
            name: "power",
            reason: "not computed",
        })
    }

    /// `T_i` brought down to `level`.
    fn at_level(&mut self, i: usize, level: usize) -> Result<A::Value> {
        self.ensure(i)?;
        let v = self.get(i)?;
        self.ops.level_down(v, level)
    }

    fn ensure(&mut self, i: usize) -> Result<()> {
        if i == 0 || self.powers.contains_key(&i) {
            return Ok(());
        }
        let a = 1usize << (ceil_log2(i) - 1);
        let b = i - a;
        self.ensure(a)?;
        self.ensure(b)?;
        if self.chebyshev && a != b {
            // T_{a−b}, for T_{a+b} = 2·T_a·T_b − T_{a−b} below.
            self.ensure(a - b)?;
        }
        let ops = self.ops;
        let level = self.top - ceil_log2(a);
        let ta = at_level(ops, self.get(a)?, level)?;
        let tb = at_level(ops, self.get(b)?, level)?;
        // Each product is relinearised and rescaled in one step
        // ([`product_rescaled`]); Chebyshev's factor 2 multiplies `T_a`
        // first, and `T_{a−b}` joins the product before the division.
        let value = if !self.chebyshev {
            product_rescaled(ops, ta, &tb, None)?
        } else if a == b {
            // T_{2a} = 2·T_a² − 1.
            let doubled = AtLevel::Lower(ops.mul_integer(&ta, 2)?);
            drop(ta);
            let r = product_rescaled(ops, doubled, &tb, None)?;
            ops.add_const(&r, Complex64::new(-1.0, 0.0))?
        } else {
            // T_{a+b} = 2·T_a·T_b − T_{a−b}.
            let minus_td = {
                let td = at_level(ops, self.get(a - b)?, level)?;
                let ratio = ops.scale(&ta) * ops.scale(&tb) / ops.scale(&td);
                ops.mul_const(&td, Complex64::new(-1.0, 0.0), ratio)?
            };
            let doubled = AtLevel::Lower(ops.mul_integer(&ta, 2)?);
            drop(ta);
            product_rescaled(ops, doubled, &tb, Some(&minus_td))?
        };
        self.powers.insert(i, value);
        Ok(())
    }

    /// Evaluates `c` (trailing zeros trimmed or not) `budget` levels below
    /// the top, at scale `target`.
    ///
    /// `c` unrolls into a chain `q_1·B_1 + (q_2·B_2 + (… + leaf))` of one
    /// level: each quotient `q_j` is evaluated (and finished) one level up,
    /// then the products `q_j·B_j`, the leaf `Σ c_i T_i` and the constants
    /// are summed at that level and relinearised and rescaled once
    /// ([`SlotArithmetic::tensor_add`], [`SlotArithmetic::relinearize_sum`]:
    /// lazy relinearisation and
    /// rescaling, Bossuat et al., ePrint 2020/1203 §4.2) instead of once
    /// per product.
    fn eval(&mut self, c: &[f64], budget: usize, target: f64) -> Result<Node<A::Value>> {
        let Some(degree) = degree_of(c) else {
            return Ok(Node::Const(0.0));
        };
        if degree == 0 {
            return Ok(Node::Const(c.first().copied().unwrap_or(0.0)));
        }
        let out_level = self.top.checked_sub(budget).ok_or(Error::LevelTooLow {
            operation: "polynomial evaluation",
            needed: budget,
            level: self.top,
        })?;
        let mul_level = out_level + 1;
        let prime = self.ops.prime(mul_level)? as f64;
        // What the chain sums at `mul_level`, at scale `target·prime`: the
        // products to relinearise, the terms already linear, a constant.
        let mut products: Option<A::Tensored> = None;
        let mut linear: Option<A::Value> = None;
        let mut constant = 0.0;
        let mut rest = c.to_vec();
        while let Some(degree) = degree_of(&rest) {
            let c0 = rest.first().copied().unwrap_or(0.0);
            if degree == 0 {
                constant += c0;
                break;
            }
            let deepest = rest
                .iter()
                .enumerate()
                .skip(1)
                .filter(|(_, v)| **v != 0.0)
                .map(|(i, _)| ceil_log2(i))
                .max()
                .unwrap_or(0);
            if degree < self.baby && deepest < budget {
                let sum = self.leaf(&rest, mul_level, target * prime)?;
                self.add_linear(&mut linear, sum)?;
                constant += c0;
                break;
            }
            let giant = 1usize << (depth_for_degree(degree) - 1);
            let (q, r) = self.divide(&rest, giant, degree);
            let tg = self.at_level(giant, mul_level)?;
            let q_target = target * prime / self.ops.scale(&tg);
            match self.eval(&q, budget - 1, q_target)? {
                Node::Const(0.0) => {}
                Node::Const(v) => {
                    let m = self.ops.mul_const(&tg, Complex64::new(v, 0.0), q_target)?;
                    self.add_linear(&mut linear, m)?;
                }
                // Added at once, so that the factors are dropped here.
                Node::Value(qv) => self.ops.tensor_add(&mut products, &qv, &tg)?,
            }
            rest = r;
        }
        // The constant joins the linear terms before the division, where
        // there are any; the products are relinearised and the sum rescaled
        // in one step ([`SlotArithmetic::relinearize_sum_rescale`]).
        let linear = match linear {
            Some(l) if constant != 0.0 => {
                let with_constant = self.ops.add_const(&l, Complex64::new(constant, 0.0))?;
                constant = 0.0;
                Some(with_constant)
            }
            other => other,
        };
        let sum = match (products, linear) {
            (None, None) => return Ok(Node::Const(constant)),
            (None, Some(linear)) => self.ops.rescale(&linear)?,
            (Some(products), linear) => self
                .ops
                .relinearize_sum_rescale(products, linear.as_ref())?,
        };
        Ok(Node::Value(if constant == 0.0 {
            sum
        } else {
            self.ops.add_const(&sum, Complex64::new(constant, 0.0))?
        }))
    }

    /// `acc += v` (`acc` set when empty).
    fn add_linear(&self, acc: &mut Option<A::Value>, v: A::Value) -> Result<()> {
        match acc.as_mut() {
            None => *acc = Some(v),
            Some(sum) => self.ops.add_assign(sum, &v)?,
        }
        Ok(())
    }

    /// `p = q·B_g + r` for the giant `B_g` (`T_g` or `x^g`), `degree < 2g`.
    fn divide(&self, c: &[f64], g: usize, degree: usize) -> (Vec<f64>, Vec<f64>) {
        let coef = |i: usize| c.get(i).copied().unwrap_or(0.0);
        if self.chebyshev {
            // q_0 = c_g, q_j = 2·c_{g+j}; r_i = c_i − c_{2g−i} (i ≥ 1), r_0 = c_0.
            let q: Vec<f64> = (0..=degree - g)
                .map(|j| if j == 0 { coef(g) } else { 2.0 * coef(g + j) })
                .collect();
            let r: Vec<f64> = (0..g)
                .map(|i| {
                    if i == 0 {
                        coef(0)
                    } else {
                        coef(i) - coef(2 * g - i)
                    }
                })
                .collect();
            (q, r)
        } else {
            let q = (g..=degree).map(coef).collect();
            let r = (0..g).map(coef).collect();
            (q, r)
        }
    }

    /// `Σ_{i ≥ 1} c_i T_i` at `level`, scale `scale`, not rescaled: each
    /// `T_i` brought down and multiplied by its coefficient in one pass.
    fn leaf(&mut self, c: &[f64], level: usize, scale: f64) -> Result<A::Value> {
        let mut acc: Option<A::Value> = None;
        for (i, &ci) in c.iter().enumerate().skip(1) {
            if ci == 0.0 {
                continue;
            }
            self.ensure(i)?;
            let ti = self.get(i)?;
            let const_scale = scale / self.ops.scale(ti);
            let term =
                self.ops
                    .mul_const_at_level(ti, Complex64::new(ci, 0.0), const_scale, level)?;
            self.add_linear(&mut acc, term)?;
        }
        acc.ok_or(Error::InvalidDegree { degree: 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approx::chebyshev::interpolate;
    use crate::arith::{PlainSimulator, SimValue};
    use hemem_ckks::params::{Parameters, Preset};
    use hemem_ckks::testing::{seeded_rng, unit_interval};
    use rand_core::Rng;

    fn input(sim: &PlainSimulator, values: &[f64], level: usize) -> SimValue {
        let z: Vec<Complex64> = values.iter().map(|&v| Complex64::new(v, 0.0)).collect();
        let scale = sim.prime(level).unwrap() as f64;
        sim.value(&z, level, scale).unwrap()
    }

    fn max_error(out: &SimValue, values: &[f64], poly: &Polynomial) -> f64 {
        out.values()
            .iter()
            .zip(values)
            .map(|(o, &v)| (o - Complex64::new(poly.evaluate_f64(v), 0.0)).norm())
            .fold(0.0, f64::max)
    }

    #[test]
    fn depth_is_optimal_and_scales_land_on_target() {
        let mut rng = seeded_rng(41);
        for preset in [Preset::FGb, Preset::FGa] {
            let params = Parameters::from_preset(preset).unwrap();
            let sim = PlainSimulator::new(&params);
            // EvalMod's levels (below CoeffToSlot): FGa's top three primes
            // are 56-bit, and hemem's rescale rule refuses a 60-bit target
            // scale there.
            let top = params.max_level().0 - 3;
            let n = 1 << 8;
            let xs = unit_interval(&mut rng, n);
            for degree in [1usize, 2, 3, 4, 7, 8, 15, 16, 30, 31, 32, 63, 64, 100, 127] {
                let coeffs: Vec<f64> = (0..=degree)
                    .map(|_| {
                        ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 - 0.5)
                            / (1.0 + degree as f64).sqrt()
                    })
                    .collect();
                for basis in [Basis::Chebyshev { a: -1.0, b: 1.0 }, Basis::Monomial] {
                    let poly = Polynomial::new(basis, coeffs.clone()).unwrap();
                    let x = input(&sim, &xs, top);
                    let target = sim.prime(top - poly.depth()).unwrap() as f64 * 0.75;
                    sim.reset_counts();
                    let out = evaluate(&sim, &x, &poly, target).unwrap();
                    assert_eq!(poly.depth(), depth_for_degree(degree));
                    assert_eq!(out.level(), top - poly.depth(), "{preset} degree {degree}");
                    assert!(
                        (out.scale() / target - 1.0).abs() < 2f64.powi(-40),
                        "{preset} degree {degree}"
                    );
                    let err = max_error(&out, &xs, &poly);
                    assert!(
                        err < 2f64.powi(-40),
                        "{preset} degree {degree} {basis:?}: {err:e}"
                    );
                }
            }
        }
    }

    #[test]
    fn chebyshev_fit_of_a_function_on_an_interval() {
        // exp on [−3, 5]: the affine map costs a level (α = 1/4 is not an
        // integer); on [−0.5, 0.5] it is free (α = 2).
        let params = Parameters::from_preset(Preset::FGb).unwrap();
        let sim = PlainSimulator::new(&params);
        let mut rng = seeded_rng(42);
        let top = params.max_level().0;
        for (a, b, extra) in [(-3.0, 5.0, 1usize), (-0.5, 0.5, 0)] {
            let coeffs = interpolate(f64::exp, a, b, 40).unwrap();
            let poly = Polynomial::chebyshev(a, b, coeffs).unwrap();
            assert_eq!(poly.depth(), 6 + extra);
            let xs: Vec<f64> = unit_interval(&mut rng, 64)
                .iter()
                .map(|u| a + (b - a) * (u + 1.0) / 2.0)
                .collect();
            let x = input(&sim, &xs, top);
            let target = 2f64.powi(50);
            let out = evaluate(&sim, &x, &poly, target).unwrap();
            assert_eq!(out.level(), top - poly.depth());
            let err = out
                .values()
                .iter()
                .zip(&xs)
                .map(|(o, &v)| (o.re - v.exp()).abs() / v.exp())
                .fold(0.0, f64::max);
            assert!(err < 1e-12, "[{a}, {b}]: {err:e}");
        }
    }

    #[test]
    fn bad_input_is_refused() {
        let params = Parameters::from_preset(Preset::FGb).unwrap();
        let sim = PlainSimulator::new(&params);
        let x = input(&sim, &[0.5, -0.25], 3);
        let poly = Polynomial::monomial(vec![0.0; 20].into_iter().chain([1.0]).collect()).unwrap();
        assert!(matches!(
            evaluate(&sim, &x, &poly, 2f64.powi(40)),
            Err(Error::LevelTooLow { .. })
        ));
        let constant = Polynomial::monomial(vec![3.0, 0.0]).unwrap();
        assert!(matches!(
            evaluate(&sim, &x, &constant, 2f64.powi(40)),
            Err(Error::InvalidDegree { .. })
        ));
        assert!(Polynomial::chebyshev(1.0, 1.0, vec![1.0]).is_err());
        // Finite ends whose width overflows: the map to [−1, 1] would be 0.
        assert!(matches!(
            Polynomial::chebyshev(-1e308, 1.5e308, vec![0.0, 1.0]),
            Err(Error::InvalidInterval { .. })
        ));
        assert!(Polynomial::chebyshev(-1e307, 1e307, vec![0.0, 1.0]).is_ok());
        assert!(Polynomial::monomial(vec![f64::NAN]).is_err());
        let linear = Polynomial::monomial(vec![0.0, 1.0]).unwrap();
        assert!(evaluate(&sim, &x, &linear, f64::INFINITY).is_err());
    }
}
