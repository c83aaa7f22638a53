//! Round trips and refusals of every object.

use super::*;
use crate::params::{Parameters, ParametersSpec, Preset, SecurityCheck};
use crate::serialize::ToBytes as _;
use crate::{Error, ParametersError};

/// A parameter file written field by field, with whatever the writer
/// likes in the security-claim slot and the test flag.
fn parameter_file(spec: &ParametersSpec, claim: Option<usize>, test: bool, fp: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out, Kind::Parameters, fp).unwrap();
    w.u32(spec.name.len() as u32).unwrap();
    w.bytes(spec.name.as_bytes()).unwrap();
    w.u32(spec.log_n).unwrap();
    w.u32(spec.log_slots).unwrap();
    for bits in [&spec.q_bits, &spec.p_bits] {
        w.u32(bits.len() as u32).unwrap();
        for &b in bits {
            w.u32(b).unwrap();
        }
    }
    w.u32(spec.dnum as u32).unwrap();
    w.u32(spec.enc_level as u32).unwrap();
    write_opt(&mut w, spec.post_bootstrap_level).unwrap();
    w.u32(spec.user_primes as u32).unwrap();
    w.u32(spec.hamming_weight as u32).unwrap();
    write_opt(&mut w, claim).unwrap();
    w.u8(u8::from(test)).unwrap();
    write_opt(&mut w, spec.bootstrap_rotation_keys).unwrap();
    w.finish().unwrap();
    out
}

#[test]
fn a_file_cannot_claim_security() {
    // FGb's description at N = 2^11 (log QP = 1555, bound 53), in a file
    // that claims 128 bits under FGb's name.
    let mut spec = Preset::FGb.spec();
    spec.log_n = 11;
    spec.log_slots = 10;
    let fp = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure)
        .unwrap()
        .fingerprint();
    let bytes = parameter_file(&spec, Some(128), false, fp);
    assert!(matches!(
        Parameters::from_bytes(&bytes, SecurityCheck::Enforce),
        Err(Error::Parameters(ParametersError::Insecure {
            log_n: 11,
            bound: Some(53),
            ..
        }))
    ));
    // Opting in loads the parameters but not the claim.
    assert!(matches!(
        Parameters::from_bytes(&bytes, SecurityCheck::AllowInsecure),
        Err(Error::Serialization(SerializationError::InvalidField {
            field: "claimed_security_bits"
        }))
    ));
    let honest = parameter_file(&spec, None, false, fp);
    let p = Parameters::from_bytes(&honest, SecurityCheck::AllowInsecure).unwrap();
    assert_eq!(p.security().bits, 0);
    assert!(p.is_insecure());

    // A test preset with its flag cleared and a claim added.
    let test = Parameters::from_preset_with(Preset::TestFTb, SecurityCheck::AllowInsecure).unwrap();
    let forged = parameter_file(test.spec(), Some(128), false, test.fingerprint());
    assert!(matches!(
        Parameters::from_bytes(&forged, SecurityCheck::Enforce),
        Err(Error::Parameters(ParametersError::Insecure {
            log_n: 11,
            test: false,
            ..
        }))
    ));
    // Its honest file is refused as test parameters, and says so.
    let Err(e) = Parameters::from_bytes(&test.to_bytes().unwrap(), SecurityCheck::Enforce) else {
        panic!("a test preset's file loaded without opt-in");
    };
    assert!(
        matches!(
            e,
            Error::Parameters(ParametersError::Insecure { test: true, .. })
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("test parameters"), "{e}");
}

#[test]
fn a_loaded_preset_is_matched_again() {
    let real = Parameters::from_preset(Preset::FTb).unwrap();
    let loaded = Parameters::from_bytes(&real.to_bytes().unwrap(), SecurityCheck::Enforce).unwrap();
    assert_eq!(loaded, real);
    assert_eq!(loaded.security().bits, 128);
    // FTb's structure with its claim slot emptied: the slot must say what
    // the library decides, so the edit is refused.
    let edited = parameter_file(real.spec(), None, false, real.fingerprint());
    assert!(matches!(
        Parameters::from_bytes(&edited, SecurityCheck::Enforce),
        Err(Error::Serialization(SerializationError::InvalidField {
            field: "claimed_security_bits"
        }))
    ));
    // A claim of another level is refused as well.
    let edited = parameter_file(real.spec(), Some(256), false, real.fingerprint());
    assert!(Parameters::from_bytes(&edited, SecurityCheck::Enforce).is_err());
}
