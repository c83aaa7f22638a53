//! Parameter files edited field by field: each edit is refused or judged
//! again, never trusted.

use rand::{RngExt, SeedableRng};

use super::*;
use crate::params::{Parameters, ParametersSpec, Preset, SecurityCheck};
use crate::{Error, SerializationError};

/// A seed from the clock, printed with every failure.
fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// Any value in `0..=max` but `old`.
fn other(rng: &mut impl RngExt, max: usize, old: usize) -> usize {
    loop {
        let v = rng.random_range(0..=max);
        if v != old {
            return v;
        }
    }
}

/// Any `Option` of a value in `0..=max` but `old`.
fn other_opt(rng: &mut impl RngExt, max: usize, old: Option<usize>) -> Option<usize> {
    loop {
        let v = rng.random_bool(0.8).then(|| rng.random_range(0..=max));
        if v != old {
            return v;
        }
    }
}

/// Edits one field of `spec` to another value that still makes a valid
/// description; says which.
fn edit(spec: &mut ParametersSpec, rng: &mut impl RngExt, field: usize) -> &'static str {
    let primes = spec.q_bits.len();
    match field {
        0 => {
            let len = rng.random_range(0..=24);
            let name: String = (0..len)
                .map(|_| char::from(rng.random_range(b' '..=b'~')))
                .collect();
            if name == spec.name {
                spec.name.push('!');
            } else {
                spec.name = name;
            }
            "name"
        }
        1 => {
            let max = spec.log_n as usize - 1;
            spec.log_slots = other(rng, max, spec.log_slots as usize) as u32;
            "log_slots"
        }
        2 => {
            spec.enc_level = other(rng, primes - 1, spec.enc_level);
            "enc_level"
        }
        3 => {
            spec.post_bootstrap_level = other_opt(rng, primes - 1, spec.post_bootstrap_level);
            "post_bootstrap_level"
        }
        4 => {
            spec.user_primes = other(rng, primes, spec.user_primes);
            "user_primes"
        }
        5 => {
            spec.insecure_test = !spec.insecure_test;
            "insecure_test"
        }
        6 => {
            spec.bootstrap_rotation_keys = other_opt(rng, 4096, spec.bootstrap_rotation_keys);
            "bootstrap_rotation_keys"
        }
        7 => {
            spec.dnum = 1 + other(rng, primes - 1, spec.dnum - 1);
            "dnum"
        }
        8 => {
            let n = 1usize << spec.log_n;
            spec.hamming_weight = 1 + other(rng, n - 1, spec.hamming_weight - 1);
            "hamming_weight"
        }
        _ => {
            let i = rng.random_range(0..primes);
            spec.q_bits[i] = 40 + other(rng, 20, spec.q_bits[i] as usize - 40) as u32;
            "q_bits"
        }
    }
}

/// `spec` in a parameter file whose checksums are right and whose
/// security-claim slot says what hemem decides, under the fingerprint
/// `fp`.
fn file(spec: &ParametersSpec, fp: u64) -> Vec<u8> {
    let honest = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure).unwrap();
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out, Kind::Parameters, fp).unwrap();
    honest.write_body(&mut w).unwrap();
    w.finish().unwrap();
    out
}

#[test]
fn every_edited_field_is_refused() {
    let seed = fresh_seed();
    println!("seed {seed}");
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let bases = [
        Preset::TestFTb,
        Preset::TestFGb,
        Preset::TestFTa,
        Preset::FTb,
    ];
    let mut edited_fields = [0usize; 10];
    for case in 0..60 {
        let preset = bases[case % bases.len()];
        let original = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
        // Every field in turn, the prime sizes' edits in between. The
        // edited description must itself be valid: an edit whose digits
        // outgrow the special primes (a smaller dnum, a larger prime) is
        // drawn again, and given up where none fits (FTb's dnum: any
        // smaller one pairs primes beyond its 54-bit P).
        let field = case / bases.len() % 10;
        let Some((spec, what, honest)) = (0..64).find_map(|_| {
            let mut spec = original.spec().clone();
            let what = edit(&mut spec, &mut rng, field);
            let honest = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure).ok()?;
            Some((spec, what, honest))
        }) else {
            continue;
        };
        edited_fields[field] += 1;
        // Written honestly, the edited description loads: only the
        // fingerprint tells the edit.
        assert_ne!(
            honest.fingerprint(),
            original.fingerprint(),
            "seed {seed}: {preset} with {what} edited"
        );
        let edited = file(&spec, original.fingerprint());
        assert!(
            matches!(
                Parameters::from_bytes(&edited, SecurityCheck::AllowInsecure),
                Err(Error::Serialization(
                    SerializationError::FingerprintMismatch { stated, computed }
                )) if stated == original.fingerprint() && computed == honest.fingerprint()
            ),
            "seed {seed}: {preset} with {what} edited"
        );
        let resealed = file(&spec, honest.fingerprint());
        assert_eq!(
            Parameters::from_bytes(&resealed, SecurityCheck::AllowInsecure).unwrap(),
            honest,
            "seed {seed}: {preset} with {what} edited"
        );
    }
    assert!(
        edited_fields.iter().all(|&n| n > 0),
        "seed {seed}: edits per field {edited_fields:?}"
    );
}

#[test]
fn a_renamed_preset_keeps_its_security_but_not_its_fingerprint() {
    let real = Parameters::from_preset(Preset::FTb).unwrap();
    let mut spec = real.spec().clone();
    spec.name = "FTb (edited)".into();
    let edited = file(&spec, real.fingerprint());
    assert!(matches!(
        Parameters::from_bytes(&edited, SecurityCheck::Enforce),
        Err(Error::Serialization(
            SerializationError::FingerprintMismatch { .. }
        ))
    ));
    let renamed = Parameters::new(spec.clone(), SecurityCheck::Enforce).unwrap();
    let loaded =
        Parameters::from_bytes(&file(&spec, renamed.fingerprint()), SecurityCheck::Enforce)
            .unwrap();
    assert_eq!(loaded.security().bits, 128);
    assert_eq!(loaded.security().preset, Some(Preset::FTb));
}
