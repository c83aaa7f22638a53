//! [`PlainSimulator`]: an exact f64 model of [`SlotArithmetic`] over the
//! real primes of a hemem-ckks [`Parameters`], with its values
//! ([`SimValue`]), plaintexts ([`SimPlain`]), operation counts
//! ([`OpCounts`]) and rescale rule ([`RescaleRule`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use hemem_ckks::encoding::SpecialFft;
use hemem_ckks::params::{Level, Parameters, Scale};
use num_complex::Complex64;
use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};

use super::{NoiseModel, SlotArithmetic, scales_match};
use crate::{Error, Result};

/// Which rule [`PlainSimulator::rescale`] applies to the resulting scale.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RescaleRule {
    /// hemem-ckks's [`Parameters::check_rescale`]: the result scale must not
    /// exceed twice the dropped prime. It protects user computation, but it
    /// refuses SlotToCoeff's schedule on presets whose user scale exceeds
    /// the bottom primes (FGa, FTb, …); see `docs/BOOTSTRAP-SCHEDULE.md`.
    #[default]
    Hemem,
    /// Only what correctness needs: the level must be at least 1 and the
    /// value must fit its modulus (checked on coefficients, see
    /// [`PlainSimulator::with_overflow_check`]).
    Headroom,
}

/// Operation counts of a [`PlainSimulator`], for cost estimates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Additions and subtractions of two values.
    pub additions: usize,
    /// Tensor products with relinearisation.
    pub mul_relin: usize,
    /// Rescales.
    pub rescales: usize,
    /// Constant multiplications.
    pub mul_const: usize,
    /// Plaintext multiplications.
    pub mul_plain: usize,
    /// Rotations by a nonzero step (hoisted or not).
    pub rotations: usize,
    /// Hoisted rotation groups (one decomposition each).
    pub hoisted_groups: usize,
    /// Conjugations.
    pub conjugations: usize,
    /// Plaintexts encoded.
    pub encodings: usize,
    /// ModDowns (divisions by `P`) of one polynomial: two per ordinary key
    /// switch, fewer with double hoisting ([`crate::hoisting`]).
    pub mod_downs: usize,
    /// Limb NTTs (forward or inverse, `N` points, one prime) the CPU
    /// backend's algorithms run for the counted operations: decompositions
    /// (`dnum·(l+1+K)` at level `l`), ModDowns (`K + l + 1` each), rescales
    /// (`l + 1` per part) and expansions of compact plaintexts (`l + 1`, or
    /// `l + 1 + K` over `Q ∪ P`). Encodings at setup are not counted.
    pub ntt_limbs: usize,
}

/// A simulated ciphertext: the slot values in message units (the plaintext
/// divided by the scale, noise included), a level and an exact scale.
#[derive(Clone, Debug, PartialEq)]
pub struct SimValue {
    pub(crate) slots: Vec<Complex64>,
    pub(crate) level: usize,
    pub(crate) scale: f64,
}

impl SimValue {
    /// The slot values (message units).
    pub fn values(&self) -> &[Complex64] {
        &self.slots
    }

    /// The level.
    pub fn level(&self) -> usize {
        self.level
    }

    /// The scale.
    pub fn scale(&self) -> f64 {
        self.scale
    }
}

/// A simulated encoded plaintext: the slot values it decodes to (after the
/// encoder's rounding), its level and scale.
#[derive(Clone, Debug, PartialEq)]
pub struct SimPlain {
    slots: Vec<Complex64>,
    pub(crate) level: usize,
    scale: f64,
    /// Over `Q ∪ P` (for double hoisting, [`crate::hoisting`]).
    pub(crate) extended: bool,
}

impl SimPlain {
    /// The decoded slot values (after rounding).
    pub fn values(&self) -> &[Complex64] {
        &self.slots
    }

    /// The level.
    pub fn level(&self) -> usize {
        self.level
    }

    /// The scale.
    pub fn scale(&self) -> f64 {
        self.scale
    }
}

/// An exact f64 implementation of [`SlotArithmetic`] over the real primes of
/// a hemem-ckks [`Parameters`].
///
/// It keeps slot vectors in message units and tracks levels and scales with
/// the same f64 operations as hemem's evaluator. It models exactly the
/// rounding of constants (`round(c·scale)`) and of encoded plaintexts (the
/// encoder's special FFT and coefficient rounding); it refuses what hemem
/// refuses (mismatched levels, scales, slot counts; the rescale rule); it
/// checks that coefficients fit the modulus; and, with a [`NoiseModel`], it
/// adds Gaussian rescale, key-switch and encryption noise so that precision
/// can be estimated without keys.
///
/// Not `Sync`: its random source and counters sit in `RefCell`s.
#[derive(Debug)]
pub struct PlainSimulator {
    pub(crate) params: Parameters,
    primes: Vec<u64>,
    /// `log2 Q_l` for each level.
    log_q: Vec<f64>,
    pub(crate) noise: NoiseModel,
    rule: RescaleRule,
    check_overflow: bool,
    round_plaintexts: bool,
    rng: RefCell<ChaCha20Rng>,
    pub(crate) counts: RefCell<OpCounts>,
    ffts: RefCell<HashMap<usize, Rc<SpecialFft>>>,
}

impl PlainSimulator {
    /// A noiseless simulator with hemem's rescale rule and overflow checks.
    pub fn new(params: &Parameters) -> Self {
        let primes: Vec<u64> = params.q_moduli().iter().map(|m| m.value()).collect();
        let mut acc = 0.0;
        let log_q = primes
            .iter()
            .map(|&q| {
                acc += (q as f64).log2();
                acc
            })
            .collect();
        Self {
            params: params.clone(),
            primes,
            log_q,
            noise: NoiseModel::none(),
            rule: RescaleRule::Hemem,
            check_overflow: true,
            round_plaintexts: true,
            rng: RefCell::new(ChaCha20Rng::seed_from_u64(0)),
            counts: RefCell::new(OpCounts::default()),
            ffts: RefCell::new(HashMap::new()),
        }
    }

    /// Injects `noise`, drawn from a ChaCha20 stream seeded with `seed`.
    pub fn with_noise(mut self, noise: NoiseModel, seed: u64) -> Self {
        self.noise = noise;
        self.rng = RefCell::new(ChaCha20Rng::seed_from_u64(seed));
        self
    }

    /// Uses `rule` for rescales.
    pub fn with_rescale_rule(mut self, rule: RescaleRule) -> Self {
        self.rule = rule;
        self
    }

    /// Turns the modulus-overflow check on or off. When on, the simulator
    /// computes the coefficients of a value (inverse special FFT) before
    /// every rescale and after every level drop and refuses values whose
    /// largest scaled coefficient reaches half the modulus.
    pub fn with_overflow_check(mut self, on: bool) -> Self {
        self.check_overflow = on;
        self
    }

    /// Turns the rounding of encoded plaintexts off (on by default): a
    /// diagnostic that isolates the error the quantisation of linear
    /// transform diagonals causes.
    pub fn with_plaintext_rounding(mut self, on: bool) -> Self {
        self.round_plaintexts = on;
        self
    }

    /// The parameters.
    pub fn params(&self) -> &Parameters {
        &self.params
    }

    /// The noise model.
    pub fn noise(&self) -> &NoiseModel {
        &self.noise
    }

    /// The operation counts so far.
    pub fn counts(&self) -> OpCounts {
        *self.counts.borrow()
    }

    /// Resets the operation counts.
    pub fn reset_counts(&self) {
        *self.counts.borrow_mut() = OpCounts::default();
    }

    /// A value holding exactly `values` (no noise) at `level` and `scale`.
    ///
    /// # Errors
    /// Bad slot count, level or scale; non-finite values.
    pub fn value(&self, values: &[Complex64], level: usize, scale: f64) -> Result<SimValue> {
        self.check_slots(values.len())?;
        self.check_level(level)?;
        check_scale(scale)?;
        if values
            .iter()
            .any(|v| !(v.re.is_finite() && v.im.is_finite()))
        {
            return Err(Error::NonFinite);
        }
        Ok(SimValue {
            slots: values.to_vec(),
            level,
            scale,
        })
    }

    /// A fresh encryption of `values`: the encoder's rounding plus the
    /// model's fresh-encryption noise.
    ///
    /// # Errors
    /// As [`PlainSimulator::value`].
    pub fn encrypt(&self, values: &[Complex64], level: usize, scale: f64) -> Result<SimValue> {
        let plain = self.encode(values, level, scale)?;
        let mut v = self.value(&plain.slots, level, scale)?;
        self.add_coefficient_noise(&mut v, self.noise.fresh);
        Ok(v)
    }

    /// Adds Gaussian noise of deviation `std` to the real and imaginary part
    /// of every slot (message units): to inject an error model's term
    /// directly.
    pub fn add_slot_noise(&self, a: &SimValue, std: f64) -> SimValue {
        let mut out = a.clone();
        if std > 0.0 {
            let mut rng = self.rng.borrow_mut();
            for z in &mut out.slots {
                let (g0, g1) = gaussian_pair(&mut rng);
                *z += Complex64::new(g0 * std, g1 * std);
            }
        }
        out
    }

    /// The coefficients of a value in message units, `c_k` then `c_{k+n}`
    /// (`2n` reals, the positions `k·N/(2n)` of the plaintext).
    ///
    /// # Errors
    /// An invalid slot count.
    pub fn coefficients(&self, a: &SimValue) -> Result<Vec<f64>> {
        let fft = self.fft(a.slots.len())?;
        let u = fft.inverse(&a.slots);
        Ok(u.iter()
            .map(|c| c.re)
            .chain(u.iter().map(|c| c.im))
            .collect())
    }

    /// Simulates ModRaise (BOOTSTRAP-NOTES §1, step 4) of a level-0 value:
    /// the plaintext `t = round(Δ0·m)` (noise included) gains `q_0·I` with
    /// `I` the rounding of a sum of `h+1` independent `U(−½, ½)` per
    /// coefficient (the Irwin–Hall law of `(c0 + c1·s)/q_0` for a secret of
    /// weight `h`), and is read at scale `q_0` at `level`. For sparse slot
    /// counts the `2n` coefficients stand for those left after the subsum,
    /// whose factor `N/(2n)` CoeffToSlot folds into its diagonals.
    ///
    /// Returns the raised value and `I` (coefficient order as
    /// [`PlainSimulator::coefficients`]).
    ///
    /// # Errors
    /// An operand not at level 0, a level beyond the chain.
    pub fn mod_raise(&self, a: &SimValue, level: usize) -> Result<(SimValue, Vec<i64>)> {
        if a.level != 0 {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: 0,
            });
        }
        self.check_level(level)?;
        let n = a.slots.len();
        let fft = self.fft(n)?;
        let q0 = self.prime(0)? as f64;
        let h = self.params.hamming_weight();
        let u = fft.inverse(&a.slots);
        let mut rng = self.rng.borrow_mut();
        let mut draw = || -> i64 {
            let s: f64 = (0..=h).map(|_| uniform(&mut rng) - 0.5).sum();
            s.round() as i64
        };
        let mut big_i = Vec::with_capacity(2 * n);
        let mut x = Vec::with_capacity(n);
        let mut imag_i = Vec::with_capacity(n);
        for c in &u {
            let i_re = draw();
            let i_im = draw();
            big_i.push(i_re);
            imag_i.push(i_im);
            let t_re = (c.re * a.scale).round();
            let t_im = (c.im * a.scale).round();
            x.push(Complex64::new(
                t_re / q0 + i_re as f64,
                t_im / q0 + i_im as f64,
            ));
        }
        big_i.extend(imag_i);
        let slots = fft.forward(&x);
        Ok((
            SimValue {
                slots,
                level,
                scale: q0,
            },
            big_i,
        ))
    }

    fn fft(&self, n: usize) -> Result<Rc<SpecialFft>> {
        self.check_slots(n)?;
        let mut cache = self.ffts.borrow_mut();
        Ok(cache
            .entry(n)
            .or_insert_with(|| Rc::new(SpecialFft::new(n)))
            .clone())
    }

    fn check_slots(&self, n: usize) -> Result<()> {
        let max = self.params.degree().get() / 2;
        if n == 0 || !n.is_power_of_two() || n > max {
            return Err(Error::InvalidSlots { slots: n, max });
        }
        Ok(())
    }

    fn check_level(&self, level: usize) -> Result<()> {
        let max = self.primes.len() - 1;
        if level > max {
            return Err(Error::LevelOutOfRange { level, max });
        }
        Ok(())
    }

    fn check_fits(&self, a: &SimValue) -> Result<()> {
        if !self.check_overflow {
            return Ok(());
        }
        let fft = self.fft(a.slots.len())?;
        let u = fft.inverse(&a.slots);
        let max = u
            .iter()
            .map(|c| c.re.abs().max(c.im.abs()))
            .fold(0.0, f64::max);
        if !max.is_finite() {
            return Err(Error::NonFinite);
        }
        let magnitude_log2 = max.log2() + a.scale.log2();
        let modulus_log2 = self.log_q.get(a.level).copied().unwrap_or(0.0) - 1.0;
        if max > 0.0 && magnitude_log2 >= modulus_log2 {
            return Err(Error::ModulusOverflow {
                level: a.level,
                magnitude_log2,
                modulus_log2,
            });
        }
        Ok(())
    }

    fn check_pair(&self, a: &SimValue, b: &SimValue, scales: bool) -> Result<()> {
        if a.level != b.level {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: b.level,
            });
        }
        if a.slots.len() != b.slots.len() {
            return Err(Error::SlotMismatch {
                left: a.slots.len(),
                right: b.slots.len(),
            });
        }
        if scales && !scales_match(a.scale, b.scale) {
            return Err(Error::ScaleMismatch {
                left_log2: a.scale.log2(),
                right_log2: b.scale.log2(),
            });
        }
        Ok(())
    }

    /// Adds coefficient-domain noise of deviation `sigma` (per coefficient)
    /// to `v`, as slot noise of deviation `sigma·√n / scale`.
    pub(crate) fn add_coefficient_noise(&self, v: &mut SimValue, sigma: f64) {
        if sigma > 0.0 {
            let std = sigma * (v.slots.len() as f64).sqrt() / v.scale;
            let mut rng = self.rng.borrow_mut();
            for z in &mut v.slots {
                let (g0, g1) = gaussian_pair(&mut rng);
                *z += Complex64::new(g0 * std, g1 * std);
            }
        }
    }

    fn key_switch_noise(&self, v: &mut SimValue) {
        let sigma = self.noise.key_switch_at(v.level);
        self.add_coefficient_noise(v, sigma);
    }

    /// The gadget part of the key-switch noise at `level` (without the
    /// ModDown rounding): what an inner product left in `Q ∪ P` carries.
    pub(crate) fn gadget_noise(&self, level: usize) -> f64 {
        let ks = self.noise.key_switch_at(level);
        (ks * ks - self.noise.rescale * self.noise.rescale)
            .max(0.0)
            .sqrt()
    }

    /// Counts one key-switch decomposition at `level`: `dnum·(l+1+K)` limb
    /// NTTs (the inverse of the `l + 1` limbs and, per digit, the forward
    /// transforms of the limbs it is raised to).
    pub(crate) fn count_decomposition(&self, level: usize) {
        let digits = self.params.digits_at(Level(level));
        let k = self.params.p_moduli().len();
        self.counts.borrow_mut().ntt_limbs += digits * (level + 1 + k);
    }

    /// Counts `parts` ModDowns at `level`: `K + l + 1` limb NTTs each.
    pub(crate) fn count_mod_downs(&self, level: usize, parts: usize) {
        let k = self.params.p_moduli().len();
        let mut c = self.counts.borrow_mut();
        c.mod_downs += parts;
        c.ntt_limbs += parts * (k + level + 1);
    }

    /// Counts one ordinary key switch at `level`: a decomposition and a
    /// ModDown pair.
    fn count_key_switch(&self, level: usize) {
        self.count_decomposition(level);
        self.count_mod_downs(level, 2);
    }

    pub(crate) fn rotated(a: &SimValue, steps: i64) -> SimValue {
        let n = a.slots.len();
        let k = steps.rem_euclid(n as i64) as usize;
        let mut slots = a.slots.clone();
        slots.rotate_left(k);
        SimValue {
            slots,
            level: a.level,
            scale: a.scale,
        }
    }
}

fn check_scale(scale: f64) -> Result<()> {
    if scale.is_finite() && scale > 0.0 {
        Ok(())
    } else {
        Err(Error::NonFinite)
    }
}

/// A uniform draw in `[0, 1)` with 53 random bits.
fn uniform(rng: &mut ChaCha20Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Two independent standard Gaussians (Box–Muller).
fn gaussian_pair(rng: &mut ChaCha20Rng) -> (f64, f64) {
    let u1 = 1.0 - uniform(rng);
    let u2 = uniform(rng);
    let r = (-2.0 * u1.ln()).sqrt();
    let t = 2.0 * std::f64::consts::PI * u2;
    (r * t.cos(), r * t.sin())
}

/// Rounds `c·scale` componentwise and divides back: the constant an integer
/// encoding at `scale` really multiplies or adds.
fn rounded_constant(c: Complex64, scale: f64) -> Complex64 {
    Complex64::new(
        (c.re * scale).round() / scale,
        (c.im * scale).round() / scale,
    )
}

impl SlotArithmetic for PlainSimulator {
    type Value = SimValue;
    type Plain = SimPlain;
    type Tensored = SimValue;
    /// The simulator's plaintexts are already their slot values.
    type Compact = SimPlain;

    fn limb_bytes(&self) -> u64 {
        8 * self.params.degree().get() as u64
    }

    fn slots(&self, x: &SimValue) -> usize {
        x.slots.len()
    }

    fn level(&self, x: &SimValue) -> usize {
        x.level
    }

    fn scale(&self, x: &SimValue) -> f64 {
        x.scale
    }

    fn prime(&self, level: usize) -> Result<u64> {
        self.primes
            .get(level)
            .copied()
            .ok_or(Error::LevelOutOfRange {
                level,
                max: self.primes.len() - 1,
            })
    }

    fn add(&self, a: &SimValue, b: &SimValue) -> Result<SimValue> {
        self.check_pair(a, b, true)?;
        self.counts.borrow_mut().additions += 1;
        Ok(SimValue {
            slots: a.slots.iter().zip(&b.slots).map(|(x, y)| x + y).collect(),
            level: a.level,
            scale: a.scale,
        })
    }

    fn sub(&self, a: &SimValue, b: &SimValue) -> Result<SimValue> {
        self.check_pair(a, b, true)?;
        self.counts.borrow_mut().additions += 1;
        Ok(SimValue {
            slots: a.slots.iter().zip(&b.slots).map(|(x, y)| x - y).collect(),
            level: a.level,
            scale: a.scale,
        })
    }

    fn mul_relin(&self, a: &SimValue, b: &SimValue) -> Result<SimValue> {
        self.check_pair(a, b, false)?;
        self.counts.borrow_mut().mul_relin += 1;
        self.count_key_switch(a.level);
        let mut out = SimValue {
            slots: a.slots.iter().zip(&b.slots).map(|(x, y)| x * y).collect(),
            level: a.level,
            scale: a.scale * b.scale,
        };
        self.key_switch_noise(&mut out);
        Ok(out)
    }

    fn tensor_add(&self, acc: &mut Option<SimValue>, a: &SimValue, b: &SimValue) -> Result<()> {
        self.check_pair(a, b, false)?;
        let product = SimValue {
            slots: a.slots.iter().zip(&b.slots).map(|(x, y)| x * y).collect(),
            level: a.level,
            scale: a.scale * b.scale,
        };
        *acc = Some(match acc.take() {
            None => product,
            Some(sum) => self.add(&sum, &product)?,
        });
        Ok(())
    }

    fn relinearize_sum(&self, sum: SimValue, addend: Option<&SimValue>) -> Result<SimValue> {
        let mut out = match addend {
            Some(x) => self.add(&sum, x)?,
            None => sum,
        };
        self.counts.borrow_mut().mul_relin += 1;
        self.count_key_switch(out.level);
        self.key_switch_noise(&mut out);
        Ok(out)
    }

    fn rescale(&self, a: &SimValue) -> Result<SimValue> {
        if a.level == 0 {
            return Err(Error::LevelTooLow {
                operation: "rescale",
                needed: 1,
                level: 0,
            });
        }
        self.check_fits(a)?;
        let q = self.prime(a.level)?;
        let scale = match self.rule {
            RescaleRule::Hemem => self.params.check_rescale(Level(a.level), Scale(a.scale))?.0,
            RescaleRule::Headroom => a.scale / q as f64,
        };
        {
            let mut c = self.counts.borrow_mut();
            c.rescales += 1;
            c.ntt_limbs += 2 * (a.level + 1);
        }
        let mut out = SimValue {
            slots: a.slots.clone(),
            level: a.level - 1,
            scale,
        };
        self.add_coefficient_noise(&mut out, self.noise.rescale);
        Ok(out)
    }

    fn mul_const(&self, a: &SimValue, c: Complex64, const_scale: f64) -> Result<SimValue> {
        check_scale(const_scale)?;
        if !(c.re.is_finite() && c.im.is_finite()) {
            return Err(Error::NonFinite);
        }
        self.counts.borrow_mut().mul_const += 1;
        let k = rounded_constant(c, const_scale);
        Ok(SimValue {
            slots: a.slots.iter().map(|x| x * k).collect(),
            level: a.level,
            scale: a.scale * const_scale,
        })
    }

    fn add_const(&self, a: &SimValue, c: Complex64) -> Result<SimValue> {
        if !(c.re.is_finite() && c.im.is_finite()) {
            return Err(Error::NonFinite);
        }
        let k = rounded_constant(c, a.scale);
        Ok(SimValue {
            slots: a.slots.iter().map(|x| x + k).collect(),
            level: a.level,
            scale: a.scale,
        })
    }

    fn mul_integer(&self, a: &SimValue, k: i64) -> Result<SimValue> {
        let k = k as f64;
        Ok(SimValue {
            slots: a.slots.iter().map(|x| x * k).collect(),
            level: a.level,
            scale: a.scale,
        })
    }

    fn level_down(&self, a: &SimValue, level: usize) -> Result<SimValue> {
        if level > a.level {
            return Err(Error::LevelTooLow {
                operation: "level_down",
                needed: level,
                level: a.level,
            });
        }
        let out = SimValue {
            slots: a.slots.clone(),
            level,
            scale: a.scale,
        };
        if level < a.level {
            self.check_fits(&out)?;
        }
        Ok(out)
    }

    fn encode(&self, values: &[Complex64], level: usize, scale: f64) -> Result<SimPlain> {
        self.check_level(level)?;
        check_scale(scale)?;
        if values
            .iter()
            .any(|v| !(v.re.is_finite() && v.im.is_finite()))
        {
            return Err(Error::NonFinite);
        }
        let fft = self.fft(values.len())?;
        let u = fft.inverse(values);
        let max = u
            .iter()
            .map(|c| c.re.abs().max(c.im.abs()))
            .fold(0.0, f64::max);
        let log_q = self.log_q.get(level).copied().unwrap_or(0.0);
        if max > 0.0 && max.log2() + scale.log2() >= log_q - 1.0 {
            return Err(Error::ModulusOverflow {
                level,
                magnitude_log2: max.log2() + scale.log2(),
                modulus_log2: log_q - 1.0,
            });
        }
        self.counts.borrow_mut().encodings += 1;
        if !self.round_plaintexts {
            return Ok(SimPlain {
                slots: values.to_vec(),
                level,
                scale,
                extended: false,
            });
        }
        let rounded: Vec<Complex64> = u.iter().map(|&c| rounded_constant(c, scale)).collect();
        Ok(SimPlain {
            slots: fft.forward(&rounded),
            level,
            scale,
            extended: false,
        })
    }

    fn mul_plain(&self, a: &SimValue, p: &SimPlain) -> Result<SimValue> {
        if p.extended {
            return Err(Error::InvalidParameter {
                name: "plaintext",
                reason: "a plaintext over Q ∪ P multiplies extended values only",
            });
        }
        if a.level != p.level {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: p.level,
            });
        }
        if a.slots.len() != p.slots.len() {
            return Err(Error::SlotMismatch {
                left: a.slots.len(),
                right: p.slots.len(),
            });
        }
        self.counts.borrow_mut().mul_plain += 1;
        Ok(SimValue {
            slots: a.slots.iter().zip(&p.slots).map(|(x, y)| x * y).collect(),
            level: a.level,
            scale: a.scale * p.scale,
        })
    }

    fn encode_compact(&self, values: &[Complex64], level: usize, scale: f64) -> Result<SimPlain> {
        self.encode(values, level, scale)
    }

    fn expand(&self, compact: &[&SimPlain]) -> Result<Vec<SimPlain>> {
        self.counts.borrow_mut().ntt_limbs += compact.iter().map(|p| p.level + 1).sum::<usize>();
        Ok(compact.iter().map(|&p| p.clone()).collect())
    }

    fn rotate(&self, a: &SimValue, steps: i64) -> Result<SimValue> {
        let mut out = Self::rotated(a, steps);
        if steps.rem_euclid(a.slots.len() as i64) != 0 {
            self.counts.borrow_mut().rotations += 1;
            self.count_key_switch(a.level);
            self.key_switch_noise(&mut out);
        }
        Ok(out)
    }

    /// One decomposition for all the steps, a ModDown pair for each
    /// nonzero one.
    fn rotate_hoisted(&self, a: &SimValue, steps: &[i64]) -> Result<Vec<SimValue>> {
        self.counts.borrow_mut().hoisted_groups += 1;
        let n = a.slots.len() as i64;
        if steps.iter().any(|s| s.rem_euclid(n) != 0) {
            self.count_decomposition(a.level);
        }
        steps
            .iter()
            .map(|&k| {
                let mut out = Self::rotated(a, k);
                if k.rem_euclid(n) != 0 {
                    self.counts.borrow_mut().rotations += 1;
                    self.count_mod_downs(a.level, 2);
                    self.key_switch_noise(&mut out);
                }
                Ok(out)
            })
            .collect()
    }

    fn conjugate(&self, a: &SimValue) -> Result<SimValue> {
        self.counts.borrow_mut().conjugations += 1;
        self.count_key_switch(a.level);
        let mut out = SimValue {
            slots: a.slots.iter().map(|z| z.conj()).collect(),
            level: a.level,
            scale: a.scale,
        };
        self.key_switch_noise(&mut out);
        Ok(out)
    }

    fn set_scale(&self, a: &SimValue, scale: f64) -> Result<SimValue> {
        check_scale(scale)?;
        let ratio = a.scale / scale;
        Ok(SimValue {
            slots: a.slots.iter().map(|z| z * ratio).collect(),
            level: a.level,
            scale,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hemem_ckks::params::{Preset, SecurityCheck};
    use hemem_ckks::testing::{max_abs_error, seeded_rng, unit_disk};

    fn sim(preset: Preset) -> PlainSimulator {
        let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
        PlainSimulator::new(&params)
    }

    #[test]
    fn scales_follow_hemem_arithmetic() {
        let s = sim(Preset::FGb);
        let mut rng = seeded_rng(1);
        let n = 1 << 6;
        let params = s.params().clone();
        let level = 12;
        let delta = params.default_scale(Level(level)).unwrap().0;
        let a = s.value(&unit_disk(&mut rng, n), level, delta).unwrap();
        let b = s.value(&unit_disk(&mut rng, n), level, delta).unwrap();
        let prod = s.mul_relin(&a, &b).unwrap();
        assert_eq!(prod.scale(), delta * delta);
        let r = s.rescale(&prod).unwrap();
        assert_eq!(r.level(), level - 1);
        assert_eq!(
            r.scale(),
            params.default_scale(Level(level - 1)).unwrap().0,
            "mult + rescale lands on the next default scale"
        );
        let expected: Vec<Complex64> = a
            .values()
            .iter()
            .zip(b.values())
            .map(|(x, y)| x * y)
            .collect();
        assert!(max_abs_error(r.values(), &expected) < 1e-15);
        // Mismatches are refused like hemem does.
        assert!(matches!(s.add(&a, &r), Err(Error::LevelMismatch { .. })));
        let other = s.value(a.values(), level, delta * 1.001).unwrap();
        assert!(matches!(
            s.add(&a, &other),
            Err(Error::ScaleMismatch { .. })
        ));
        let close = s.value(a.values(), level, delta * (1.0 + 1e-14)).unwrap();
        assert!(s.add(&a, &close).is_ok());
        let fewer = s.value(&a.values()[..n / 2], level, delta).unwrap();
        assert!(matches!(s.add(&a, &fewer), Err(Error::SlotMismatch { .. })));
        let zero = s.level_down(&a, 0).unwrap();
        assert!(matches!(s.rescale(&zero), Err(Error::LevelTooLow { .. })));
        assert!(s.level_down(&zero, 1).is_err());
    }

    #[test]
    fn constants_are_rounded_at_their_scale() {
        let s = sim(Preset::FGb);
        let mut rng = seeded_rng(2);
        let n = 16;
        let a = s.value(&unit_disk(&mut rng, n), 5, 2f64.powi(40)).unwrap();
        let c = Complex64::new(0.123_456_789, -0.987_654_321);
        let m = s.mul_const(&a, c, 1000.0).unwrap();
        assert_eq!(m.scale(), 2f64.powi(40) * 1000.0);
        let k = Complex64::new(123.0 / 1000.0, -988.0 / 1000.0);
        for (x, y) in m.values().iter().zip(a.values()) {
            assert!((x - y * k).norm() < 1e-15);
        }
        let added = s.add_const(&a, c).unwrap();
        for (x, y) in added.values().iter().zip(a.values()) {
            assert!((x - y - c).norm() < 2f64.powi(-40));
            assert_ne!(x - y, c, "the constant is rounded at the value's scale");
        }
        let i = s.mul_const(&a, Complex64::new(0.0, -1.0), 1.0).unwrap();
        assert_eq!(i.scale(), a.scale());
        for (x, y) in i.values().iter().zip(a.values()) {
            assert_eq!(*x, y * Complex64::new(0.0, -1.0));
        }
    }

    #[test]
    fn encode_models_the_encoder_rounding() {
        let s = sim(Preset::FGb);
        let mut rng = seeded_rng(3);
        let n = 1 << 10;
        let z = unit_disk(&mut rng, n);
        // A coarse scale makes the rounding visible; it matches hemem's
        // encoder decoded.
        let p = s.encode(&z, 3, 2f64.powi(12)).unwrap();
        let err = max_abs_error(p.values(), &z);
        assert!(err > 1e-5 && err < 1e-1, "{err}");
        let fft = SpecialFft::new(n);
        let u = fft.inverse(p.values());
        for c in u {
            let (a, b) = (c.re * 4096.0, c.im * 4096.0);
            assert!((a - a.round()).abs() < 1e-6 && (b - b.round()).abs() < 1e-6);
        }
    }

    #[test]
    fn rotations_are_left_rotations_and_hoisting_agrees() {
        let s = sim(Preset::TestFGb);
        let mut rng = seeded_rng(4);
        let n = 32;
        let a = s.value(&unit_disk(&mut rng, n), 4, 2f64.powi(40)).unwrap();
        let r = s.rotate(&a, 3).unwrap();
        for j in 0..n {
            assert_eq!(r.values()[j], a.values()[(j + 3) % n]);
        }
        let back = s.rotate(&r, -3).unwrap();
        assert_eq!(back.values(), a.values());
        let hoisted = s.rotate_hoisted(&a, &[0, 1, -5, 31]).unwrap();
        for (h, k) in hoisted.iter().zip([0i64, 1, -5, 31]) {
            assert_eq!(h.values(), s.rotate(&a, k).unwrap().values());
        }
        let c = s.conjugate(&a).unwrap();
        assert_eq!(c.values()[7], a.values()[7].conj());
        assert_eq!(s.counts().conjugations, 1);
        assert!(s.counts().rotations >= 5);
    }

    #[test]
    fn hemem_rule_refuses_scales_above_the_prime() {
        let params =
            Parameters::from_preset_with(Preset::FTb, SecurityCheck::AllowInsecure).unwrap();
        let strict = PlainSimulator::new(&params);
        let relaxed = PlainSimulator::new(&params).with_rescale_rule(RescaleRule::Headroom);
        let mut rng = seeded_rng(5);
        let z = unit_disk(&mut rng, 8);
        // FTb: a 36-bit scale times a 33.7-bit diagonal at level 3 (33-bit
        // prime) leaves 2^36.7: hemem's rule refuses it.
        let big = strict.value(&z, 3, 2f64.powf(36.0 + 33.7)).unwrap();
        assert!(matches!(strict.rescale(&big), Err(Error::Ckks(_))));
        let r = relaxed.rescale(&big).unwrap();
        assert!((r.scale().log2() - 36.7).abs() < 0.01);
    }

    #[test]
    fn overflow_is_detected() {
        let s = sim(Preset::FGb).with_rescale_rule(RescaleRule::Headroom);
        let z = vec![Complex64::new(1.0, 0.0); 8];
        let v = s.value(&z, 1, 2f64.powi(99)).unwrap();
        assert!(matches!(s.rescale(&v), Err(Error::ModulusOverflow { .. })));
        let v = s.value(&z, 1, 2f64.powi(95)).unwrap();
        assert!(s.rescale(&v).is_ok());
    }

    #[test]
    fn injected_noise_has_the_modelled_size() {
        let params = Parameters::from_preset(Preset::FGb).unwrap();
        let noise = NoiseModel::for_parameters(&params);
        assert!((noise.rescale - (193.0f64 / 12.0).sqrt()).abs() < 1e-12);
        // The gadget term is small below the top level, about the rounding
        // term at the top.
        assert!(noise.key_switch_at(3) < 1.01 * noise.rescale);
        assert!(noise.key_switch_at(24) > noise.rescale);
        let s = PlainSimulator::new(&params).with_noise(noise.clone(), 7);
        let n = 1 << 12;
        let z = vec![Complex64::new(0.5, 0.25); n];
        let scale = 2f64.powi(40);
        let v = s.value(&z, 10, scale * 2f64.powi(42)).unwrap();
        let r = s.rescale(&v).unwrap();
        let var: f64 = r
            .values()
            .iter()
            .zip(&z)
            .map(|(a, b)| (a - b).re.powi(2))
            .sum::<f64>()
            / n as f64;
        let expected = noise.rescale * (n as f64).sqrt() / r.scale();
        let ratio = var.sqrt() / expected;
        assert!((ratio - 1.0).abs() < 0.05, "{ratio}");
    }

    #[test]
    fn mod_raise_adds_integers_with_the_irwin_hall_spread() {
        let params = Parameters::from_preset(Preset::FGb).unwrap();
        let s = PlainSimulator::new(&params).with_noise(NoiseModel::none(), 9);
        let mut rng = seeded_rng(6);
        let n = 1 << 12;
        let z = unit_disk(&mut rng, n);
        let q0 = params.q_moduli()[0].value() as f64;
        let delta0 = q0 / 2f64.powi(14);
        let v = s.value(&z, 0, delta0).unwrap();
        let (raised, i) = s.mod_raise(&v, 24).unwrap();
        assert_eq!(raised.scale(), q0);
        assert_eq!(raised.level(), 24);
        let x = s.coefficients(&raised).unwrap();
        let m = s.coefficients(&v).unwrap();
        for ((xk, ik), mk) in x.iter().zip(&i).zip(&m) {
            let frac = xk - *ik as f64;
            assert!((frac - mk * delta0 / q0).abs() < 1e-9);
        }
        let var = i.iter().map(|&k| (k * k) as f64).sum::<f64>() / i.len() as f64;
        // Var(round(S)) = (h+1)/12 + 1/12.
        let expected = 194.0 / 12.0;
        assert!((var / expected - 1.0).abs() < 0.05, "{var}");
    }
}
