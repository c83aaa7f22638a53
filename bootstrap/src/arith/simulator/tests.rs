//! The simulator against direct f64 arithmetic.

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
    let params = Parameters::from_preset_with(Preset::FTb, SecurityCheck::AllowInsecure).unwrap();
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
