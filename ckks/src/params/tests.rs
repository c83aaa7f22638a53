//! Parameters: presets, custom descriptions, levels, scales and the
//! security decision.

use super::*;
use crate::Error;

/// `for_preset` lets exactly the test presets through: every test
/// preset builds under it, and every HEaaN preset is enforced (so a
/// HEaaN preset's spec made insecure by hand is still refused).
#[test]
fn security_for_a_preset_follows_its_name() {
    for preset in Preset::TEST {
        assert_eq!(
            SecurityCheck::for_preset(preset),
            SecurityCheck::AllowInsecure
        );
        assert!(Parameters::from_preset_with(preset, SecurityCheck::for_preset(preset)).is_ok());
        assert!(Parameters::from_preset(preset).is_err(), "{preset}");
    }
    for preset in Preset::HEAAN {
        assert_eq!(SecurityCheck::for_preset(preset), SecurityCheck::Enforce);
        let spec = preset.spec().with_log_n(12);
        assert!(
            matches!(
                Parameters::new(spec, SecurityCheck::for_preset(preset)),
                Err(Error::Parameters(ParametersError::Insecure { .. }))
            ),
            "{preset}"
        );
    }
}

/// The `fnv` crate's hasher is the FNV-1a the format was written with
/// (offset basis 0xcbf29ce484222325, prime 0x100000001b3, byte by byte),
/// so the fingerprints in existing files are unchanged.
#[test]
fn fnv_crate_is_the_formats_fnv_1a() {
    use std::hash::Hasher as _;
    let bytes: Vec<u8> = (0..=255u8).chain(b"FGb".iter().copied()).collect();
    let mut reference: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in &bytes {
        reference ^= u64::from(byte);
        reference = reference.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut crate_hash = fnv::FnvHasher::default();
    crate_hash.write(&bytes);
    assert_eq!(crate_hash.finish(), reference);
}

/// Fingerprints pinned for two presets, so a change of hash (which would
/// make every saved object unreadable) cannot pass unnoticed.
#[test]
fn fingerprints_are_pinned() {
    for (preset, expected) in [
        (Preset::FGb, 0x1c49_19e4_e815_55fe),
        (Preset::TestFTb, 0x46f2_9722_8264_76b4),
    ] {
        let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            params.fingerprint(),
            expected,
            "{preset}: {:#x}",
            params.fingerprint()
        );
    }
}

#[test]
fn presets_have_heaan_structure() {
    let expected = [
        (Preset::FGa, 1555, 24, 4, 6, 9, 9, 192, 168),
        (Preset::FGb, 1555, 25, 5, 5, 12, 12, 192, 150),
        (Preset::FVa, 2070, 30, 10, 3, 29, 16, 64, 240),
        (Preset::FVb, 2292, 30, 10, 3, 14, 14, 128, 240),
        (Preset::FVc, 2341, 30, 10, 3, 13, 13, 128, 240),
        (Preset::FTa, 777, 20, 2, 10, 8, 8, 192, 110),
        (Preset::FTb, 771, 16, 1, 16, 4, 4, 192, 136),
    ];
    for (preset, log_qp, q, k, dnum, enc, post, h, key_mib) in expected {
        let p = Parameters::from_preset(preset).unwrap();
        assert_eq!(p.log_qp(), log_qp, "{preset}");
        assert_eq!(p.q_moduli().len(), q, "{preset}");
        assert_eq!(p.p_moduli().len(), k, "{preset}");
        assert_eq!(p.dnum().get(), dnum);
        assert_eq!(p.enc_level(), Level(enc));
        assert_eq!(p.post_bootstrap_level(), Some(Level(post)));
        assert_eq!(p.hamming_weight(), h);
        assert_eq!(p.alpha(), k, "{preset}: α equals K for every preset");
        assert_eq!(p.switching_key_bytes() >> 20, key_mib, "{preset}");
        assert_eq!(p.security().bits, 128);
        assert!(p.security().within_table, "{preset}");
        for (m, &bits) in p.q_moduli().iter().zip(&p.spec().q_bits) {
            assert_eq!(m.bits(), bits);
            assert_eq!(m.value() % (2 * p.degree().get() as u64), 1);
        }
    }
}

#[test]
fn fgb_primes_match_heaan() {
    let p = Parameters::from_preset(Preset::FGb).unwrap();
    let q: Vec<u64> = p.q_moduli().iter().map(Modulus::value).collect();
    assert_eq!(q[0], 288_230_376_147_386_369);
    assert_eq!(q[1], 4_398_044_938_241);
    assert_eq!(q[12], 4_398_018_592_769);
    let specials: Vec<u64> = p.p_moduli().iter().map(Modulus::value).collect();
    assert_eq!(
        specials,
        [
            576_460_752_300_015_617,
            576_460_752_298_835_969,
            576_460_752_298_180_609,
            1_152_921_504_606_584_833,
            1_152_921_504_598_720_513
        ]
    );
}

#[test]
fn default_scales_follow_the_chain() {
    for preset in Preset::HEAAN {
        let p = Parameters::from_preset(preset).unwrap();
        let enc = p.enc_level();
        let bits = p.spec().q_bits[enc.0];
        assert_eq!(p.default_scale(enc).unwrap().0, 2f64.powi(bits as i32));
        for l in 1..=p.max_level().0 {
            let above = p.default_scale(Level(l)).unwrap().0;
            let below = p.default_scale(Level(l - 1)).unwrap().0;
            let q = p.q_moduli()[l].value() as f64;
            if l <= enc.0 {
                assert_eq!(below, above * above / q, "{preset} level {l}");
            } else {
                let rel = (above * above / q - below).abs() / below;
                assert!(rel < 1e-12, "{preset} level {l}");
            }
        }
    }
}

#[test]
fn rescale_rule_matches_design() {
    // FGa: 48-bit scale reaches level 3 (45-bit prime) but not below.
    let p = Parameters::from_preset(Preset::FGa).unwrap();
    let s4 = p.default_scale(Level(4)).unwrap();
    let product = Scale(s4.0 * s4.0);
    let s3 = p.check_rescale(Level(4), product).unwrap();
    assert_eq!(s3, p.default_scale(Level(3)).unwrap());
    let product3 = Scale(s3.0 * s3.0);
    assert!(matches!(
        p.check_rescale(Level(3), product3),
        Err(Error::Operand(OperandError::ScaleOverflow { .. }))
    ));
    // FGb: every user level rescales.
    let p = Parameters::from_preset(Preset::FGb).unwrap();
    for l in 1..=12 {
        let s = p.default_scale(Level(l)).unwrap();
        assert!(
            p.check_rescale(Level(l), Scale(s.0 * s.0)).is_ok(),
            "level {l}"
        );
    }
    assert!(matches!(
        p.check_rescale(Level(0), Scale(1.0)),
        Err(Error::Operand(OperandError::LevelTooLow { .. }))
    ));
    // FTb: 36-bit scale reaches level 3 (33-bit prime) but not below.
    let p = Parameters::from_preset(Preset::FTb).unwrap();
    let s4 = p.default_scale(Level(4)).unwrap();
    let s3 = p.check_rescale(Level(4), Scale(s4.0 * s4.0)).unwrap();
    assert!(p.check_rescale(Level(3), Scale(s3.0 * s3.0)).is_err());
}

#[test]
fn test_presets_need_opt_in_and_custom_parameters_are_checked() {
    for preset in Preset::TEST {
        assert!(matches!(
            Parameters::from_preset(preset),
            Err(Error::Parameters(ParametersError::Insecure { .. }))
        ));
        let p = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
        assert!(p.is_insecure());
        assert_eq!(p.spec().q_bits, preset.shape_of().spec().q_bits);
    }
    let mut spec = Preset::FGb.spec();
    spec.name = "not FGb".into();
    spec.enc_level = 3;
    let renamed = Parameters::new(spec.clone(), SecurityCheck::Enforce).unwrap();
    assert_eq!(renamed.security().preset, Some(Preset::FGb));
    spec.q_bits.extend([60; 4]);
    // Six primes a digit now, the top one 356 bits: P must grow with it.
    spec.p_bits.push(60);
    assert!(matches!(
        Parameters::new(spec.clone(), SecurityCheck::Enforce),
        Err(Error::Parameters(ParametersError::Insecure {
            log_n: 16,
            bound: Some(1747),
            ..
        }))
    ));
    let p = Parameters::new(spec, SecurityCheck::AllowInsecure).unwrap();
    assert_eq!(p.security().bits, 0);
    assert!("fgb".parse::<Preset>().is_ok());
    assert!(matches!(
        "FGz".parse::<Preset>(),
        Err(ParametersError::UnknownPreset { .. })
    ));
}

/// The largest log QP at 128-bit security for a uniform ternary secret,
/// copied from the HE security guidelines (2024) and OpenFHE's extension,
/// independently of `security.rs`.
fn standard_bound(log_n: u32) -> Option<u32> {
    match log_n {
        10 => Some(26),
        11 => Some(53),
        12 => Some(106),
        13 => Some(214),
        14 => Some(430),
        15 => Some(868),
        16 => Some(1747),
        17 => Some(3523),
        _ => None,
    }
}

/// Whether the special primes' bits reach every key-switching digit's
/// (runs of `⌈(L+1)/dnum⌉` Q primes), written out independently of
/// `spec.rs`.
fn p_covers_every_digit(spec: &ParametersSpec) -> bool {
    let alpha = spec.q_bits.len().div_ceil(spec.dnum);
    let p: u32 = spec.p_bits.iter().sum();
    let mut start = 0;
    while start < spec.q_bits.len() {
        let end = (start + alpha).min(spec.q_bits.len());
        if spec.q_bits[start..end].iter().sum::<u32>() > p {
            return false;
        }
        start = end;
    }
    true
}

/// What the standard says of a hand-built spec: 128 bits when log QP is
/// within the bound and the secret is at least as dense as a uniform
/// ternary one (weight ≥ ⌈2N/3⌉), else nothing.
fn standard_bits(p: &Parameters) -> u32 {
    let n = p.degree().get();
    let dense = 3 * p.hamming_weight() >= 2 * n;
    let within = standard_bound(p.degree().log2()).is_some_and(|b| p.log_qp() <= b);
    if dense && within { 128 } else { 0 }
}

/// A seed from the clock, printed with every failure.
fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

#[test]
fn a_preset_claim_does_not_follow_its_spec_to_another_degree() {
    // FGb's exact description, moved to N = 2^11 by hand: log QP = 1555
    // against a bound of 53. Nothing the caller sets makes it 128-bit.
    let mut spec = Preset::FGb.spec();
    spec.log_n = 11;
    spec.log_slots = 10;
    assert!(matches!(
        Parameters::new(spec.clone(), SecurityCheck::Enforce),
        Err(Error::Parameters(ParametersError::Insecure {
            log_n: 11,
            bound: Some(53),
            ..
        }))
    ));
    let p = Parameters::new(spec, SecurityCheck::AllowInsecure).unwrap();
    assert_eq!(p.security().bits, 0);
    assert!(p.is_insecure());
}

#[test]
fn a_preset_claim_holds_only_for_its_exact_structure() {
    use rand::{RngExt, SeedableRng};
    let seed = fresh_seed();
    println!("seed {seed}");
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    for case in 0..24 {
        let preset = [Preset::FTa, Preset::FTb, Preset::FGb][case % 3];
        let mut spec = preset.spec();
        let n = 1usize << spec.log_n;
        let what = match case / 3 % 4 {
            0 => {
                let i = rng.random_range(0..spec.q_bits.len());
                let old = spec.q_bits[i];
                let new = loop {
                    let b = rng.random_range(30..=61);
                    if b != old {
                        break b;
                    }
                };
                spec.q_bits[i] = new;
                "a Q prime's size"
            }
            1 => {
                let old = spec.hamming_weight;
                spec.hamming_weight = loop {
                    let h = rng.random_range(1..=n);
                    if h != old {
                        break h;
                    }
                };
                "the secret's weight"
            }
            2 => {
                spec.p_bits.push(rng.random_range(30..=61));
                "one more special prime"
            }
            _ => {
                spec.log_n -= rng.random_range(1..=3);
                spec.log_slots = spec.log_n - 1;
                "the ring degree"
            }
        };
        if !p_covers_every_digit(&spec) {
            // A larger Q prime can outgrow P (FTb's digits are single
            // primes under a 54-bit P): refused whatever the security.
            for check in [SecurityCheck::AllowInsecure, SecurityCheck::Enforce] {
                assert!(
                    matches!(
                        Parameters::new(spec.clone(), check),
                        Err(Error::Parameters(
                            ParametersError::SpecialModulusTooSmall { .. }
                        ))
                    ),
                    "seed {seed}: {preset} with {what} changed"
                );
            }
            continue;
        }
        let p = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure).unwrap();
        let expected = standard_bits(&p);
        assert_eq!(
            p.security().bits,
            expected,
            "seed {seed}: {preset} with {what} changed"
        );
        let enforced = Parameters::new(spec, SecurityCheck::Enforce);
        if expected == 0 {
            assert!(
                matches!(
                    enforced,
                    Err(Error::Parameters(
                        ParametersError::Insecure { .. } | ParametersError::SparseSecret { .. }
                    ))
                ),
                "seed {seed}: {preset} with {what} changed"
            );
            assert!(p.is_insecure());
        } else {
            assert!(
                enforced.is_ok(),
                "seed {seed}: {preset} with {what} changed"
            );
        }
    }
}

#[test]
fn custom_parameters_follow_the_ternary_table() {
    use rand::{RngExt, SeedableRng};
    let seed = fresh_seed();
    println!("seed {seed}");
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    for _ in 0..16 {
        let log_n = rng.random_range(12..=14);
        let n = 1usize << log_n;
        let bound = standard_bound(log_n).unwrap();
        // A chain near the bound, on either side of it.
        let target = bound + rng.random_range(0..40) - 20;
        // One special prime of 40 bits, as large as any Q prime (each its
        // own digit).
        let mut q_bits = vec![25];
        let mut total = 25;
        while total + 25 <= target - 40 {
            let b = rng.random_range(25..=40.min(target - 40 - total));
            q_bits.push(b);
            total += b;
        }
        let hamming_weight = rng.random_range(1..=n);
        let spec = ParametersSpec {
            name: "custom".into(),
            log_n,
            log_slots: log_n - 1,
            dnum: q_bits.len(),
            enc_level: q_bits.len() - 1,
            user_primes: q_bits.len(),
            q_bits,
            p_bits: vec![40],
            post_bootstrap_level: None,
            hamming_weight,
            insecure_test: false,
            bootstrap_rotation_keys: None,
        };
        let p = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure).unwrap();
        let expected = standard_bits(&p);
        assert_eq!(p.security().bits, expected, "seed {seed}: {spec:?}");
        let enforced = Parameters::new(spec.clone(), SecurityCheck::Enforce);
        match (expected, enforced) {
            (128, Ok(q)) => assert_eq!(q, p),
            (0, Err(Error::Parameters(ParametersError::Insecure { log_qp, .. }))) => {
                assert!(log_qp > bound, "seed {seed}: {spec:?}");
            }
            (0, Err(Error::Parameters(ParametersError::SparseSecret { weight, min }))) => {
                assert_eq!(weight, hamming_weight);
                assert_eq!(min, (2 * n).div_ceil(3));
                assert!(p.log_qp() <= bound);
            }
            (_, other) => panic!("seed {seed}: {spec:?} gave {other:?}"),
        }
    }
}

#[test]
fn bad_descriptions_are_typed_errors() {
    let base = Preset::FTb.spec();
    type Mutation = Box<dyn Fn(&mut ParametersSpec)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (Box::new(|s| s.log_n = 3), "degree"),
        (Box::new(|s| s.log_slots = 15), "slots"),
        (Box::new(|s| s.q_bits.clear()), "chain"),
        (Box::new(|s| s.p_bits[0] = 63), "bits"),
        (Box::new(|s| s.dnum = 0), "dnum"),
        (Box::new(|s| s.enc_level = 99), "level"),
        (Box::new(|s| s.hamming_weight = 0), "weight"),
        (Box::new(|s| s.p_bits = vec![40]), "special primes"),
    ];
    for (mutate, what) in cases {
        let mut spec = base.clone();
        mutate(&mut spec);
        assert!(
            matches!(
                Parameters::new(spec, SecurityCheck::AllowInsecure),
                Err(Error::Parameters(_))
            ),
            "{what}"
        );
    }
}

#[test]
fn special_primes_smaller_than_a_digit_are_refused() {
    // One digit of three primes (130 bits) over a 20-bit P: every key switch
    // would return noise, and the parameters used to be rated 128-bit.
    let spec = ParametersSpec {
        name: "small P".into(),
        log_n: 15,
        log_slots: 14,
        q_bits: vec![50, 40, 40],
        p_bits: vec![20],
        dnum: 1,
        enc_level: 2,
        post_bootstrap_level: None,
        user_primes: 3,
        hamming_weight: 1 << 15,
        insecure_test: false,
        bootstrap_rotation_keys: None,
    };
    for check in [SecurityCheck::Enforce, SecurityCheck::AllowInsecure] {
        assert!(matches!(
            Parameters::new(spec.clone(), check),
            Err(Error::Parameters(ParametersError::SpecialModulusTooSmall {
                p_bits: 20,
                digit_bits: 130
            }))
        ));
    }
    // Three digits of one prime each: the largest, 50 bits, is what P meets.
    let per_prime = ParametersSpec {
        dnum: 3,
        p_bits: vec![50],
        ..spec.clone()
    };
    assert!(Parameters::new(per_prime, SecurityCheck::Enforce).is_ok());
    let short = ParametersSpec {
        dnum: 3,
        p_bits: vec![49],
        ..spec
    };
    assert!(matches!(
        Parameters::new(short, SecurityCheck::AllowInsecure),
        Err(Error::Parameters(ParametersError::SpecialModulusTooSmall {
            p_bits: 49,
            digit_bits: 50
        }))
    ));
    // Every preset's P covers its largest digit.
    for preset in Preset::HEAAN.into_iter().chain(Preset::TEST) {
        assert!(
            Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).is_ok(),
            "{preset}"
        );
    }
}

#[test]
fn moduli_indices_beyond_the_top_level_are_refused() {
    let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)
        .expect("test preset");
    let top = params.max_level();
    let q = params.q_indices(top).expect("the top level");
    assert_eq!(q, (0..=top.0).collect::<Vec<_>>());
    let qp = params.qp_indices(Level(3)).expect("a level of the chain");
    assert_eq!(qp.len(), 4 + params.p_indices().len());
    for level in [Level(top.0 + 1), Level(usize::MAX)] {
        for result in [params.q_indices(level), params.qp_indices(level)] {
            assert!(
                matches!(
                    result,
                    Err(Error::Operand(OperandError::LevelOutOfRange { level: l, max }))
                        if l == level && max == top
                ),
                "{level}: {result:?}"
            );
        }
    }
}

#[test]
fn a_level_past_any_chain_never_counts_zero_primes() {
    assert_eq!(Level(0).primes(), 1);
    assert_eq!(Level(24).primes(), 25);
    assert_eq!(Level(usize::MAX).primes(), usize::MAX);
}

/// Fields a parameter file cannot hold are refused when the parameters are
/// made (they saved, then failed to load, or the rotation count was cut to
/// 32 bits and failed the fingerprint), and fields at the limits
/// round-trip; key sizes past any memory saturate instead of overflowing.
#[test]
fn fields_past_what_a_parameter_file_holds_are_refused() {
    use crate::serialize::Save;
    let base = Preset::FGb.spec().with_log_n(12);
    let too_large = |spec: ParametersSpec| match Parameters::new(spec, SecurityCheck::AllowInsecure)
    {
        Err(Error::Parameters(ParametersError::FieldTooLarge { field, .. })) => field,
        other => panic!("{other:?}"),
    };
    let mut long = base.clone();
    long.name = "n".repeat(MAX_FILE_FIELD + 1);
    assert_eq!(too_large(long), "name (bytes)");
    let mut many = base.clone();
    many.q_bits = vec![40; MAX_FILE_FIELD + 1];
    assert_eq!(too_large(many), "q_bits (primes)");
    let mut special = base.clone();
    special.p_bits = vec![60; MAX_FILE_FIELD + 1];
    assert_eq!(too_large(special), "p_bits (primes)");
    for count in [u32::MAX as usize, u32::MAX as usize + 5, usize::MAX] {
        let mut keys = base.clone();
        keys.bootstrap_rotation_keys = Some(count);
        assert_eq!(too_large(keys), "bootstrap_rotation_keys");
    }

    let mut named = base.clone();
    named.name = "é".repeat(MAX_FILE_FIELD / 2);
    named.bootstrap_rotation_keys = Some(u32::MAX as usize - 1);
    let params = Parameters::new(named, SecurityCheck::AllowInsecure).unwrap();
    let mut bytes = Vec::new();
    params.save(&mut bytes).unwrap();
    let back = Parameters::load(bytes.as_slice(), SecurityCheck::AllowInsecure).unwrap();
    assert_eq!(back.fingerprint(), params.fingerprint());
    assert_eq!(
        params.bootstrap_key_set_bytes(),
        Some((u64::from(u32::MAX) + 1) * params.switching_key_bytes())
    );

    assert_eq!(
        params.switching_key_bytes_at(Level(usize::MAX), true),
        u64::MAX
    );
}
