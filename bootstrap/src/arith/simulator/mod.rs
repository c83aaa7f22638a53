//! [`PlainSimulator`]: an exact f64 model of [`SlotArithmetic`] over the
//! real primes of a hemem-ckks [`Parameters`], with its values
//! ([`SimValue`]), plaintexts ([`SimPlain`]), operation counts
//! ([`OpCounts`]) and rescale rule ([`RescaleRule`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use hemem_ckks::encoding::SpecialFft;
use hemem_ckks::params::{Level, Parameters};
use num_complex::Complex64;
use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};

use super::{NoiseModel, SlotArithmetic, scales_match};
use crate::{Error, Result};

mod slot_arithmetic;
#[cfg(test)]
mod tests;
mod values;

pub use values::{OpCounts, SimPlain, SimValue};

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
