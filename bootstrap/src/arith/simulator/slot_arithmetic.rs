//! [`SlotArithmetic`] on the simulator: each operation on exact f64 slot
//! values, with the scales, levels, rounding and noise hemem's evaluator
//! would give.

use hemem_ckks::params::{Level, Scale};
use num_complex::Complex64;

use super::super::SlotArithmetic;
use super::{PlainSimulator, RescaleRule, SimPlain, SimValue, check_scale, rounded_constant};
use crate::{Error, Result};

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
