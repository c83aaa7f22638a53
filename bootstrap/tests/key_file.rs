//! Bootstrap key files: a round trip is bit-identical and bootstraps
//! exactly as the original keys do; damaged or foreign files are refused
//! with typed errors.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use hemem_bootstrap::schedule::{BootstrapSchedule, without_sse_choice};
use hemem_bootstrap::{BootstrapKeys, Bootstrapper};
use hemem_ckks::prelude::*;
use hemem_ckks::serialize::{
    FORMAT_VERSION, patch_payload_for_tests, payload_for_tests, reseal_for_tests,
};
use hemem_ckks::testing::{seed32, seeded_rng, unit_interval};
use hemem_ckks::{Error as CkksError, SerializationError};
use num_complex::Complex64;
use rand_core::Rng;

struct World {
    context: Context,
    secret: SecretKey,
    public: PublicKey,
    keygen: KeyGenerator,
}

fn world(preset: Preset, seed: u64) -> World {
    let params = Parameters::from_preset_with(preset, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params, DeviceSelection::Cpu).unwrap();
    let keygen = KeyGenerator::with_seed(&context, seed32(seed));
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    World {
        context,
        secret,
        public,
        keygen,
    }
}

fn schedule(context: &Context, sse: bool) -> BootstrapSchedule {
    schedule_with_slots(context, sse, None)
}

/// The recommended schedule (with SSE for test-FGb), or, for `sse: false`,
/// the lower-level path on purpose: [`BootstrapSchedule::new`] with
/// [`without_sse_choice`], the only way to a schedule (and a key file)
/// without the sparse-secret encapsulation keys.
fn schedule_with_slots(context: &Context, sse: bool, slots: Option<usize>) -> BootstrapSchedule {
    let params = context.params();
    let schedule = if sse {
        BootstrapSchedule::recommended_for_slots(params, slots.unwrap_or_else(|| params.slots()))
            .unwrap()
    } else {
        let choice = without_sse_choice(Preset::TestFGb.shape_of()).unwrap();
        BootstrapSchedule::new(params, choice, slots).unwrap()
    };
    assert_eq!(schedule.choice.sse, sse);
    schedule
}

fn saved(keys: &BootstrapKeys) -> Vec<u8> {
    let mut out = Vec::new();
    keys.save(&mut out).unwrap();
    out
}

fn serialization_error<T: std::fmt::Debug>(r: hemem_ckks::Result<T>) -> SerializationError {
    match r {
        Err(CkksError::Serialization(e)) => e,
        other => panic!("expected a serialization error, got {other:?}"),
    }
}

/// A real-valued input at level 3 (the encryption level's scale).
fn input(w: &World, seed: u64) -> (Ciphertext, Vec<f64>) {
    let params = w.context.params();
    let values = unit_interval(&mut seeded_rng(seed), params.slots());
    let z: Vec<Complex64> = values.iter().map(|&x| Complex64::new(x, 0.0)).collect();
    let enc = params.enc_level();
    let pt = Encoder::new(&w.context)
        .encode_at(&z, enc, params.default_scale(enc).unwrap(), z.len())
        .unwrap();
    let ct = Encryptor::with_seed(&w.context, seed32(seed + 1))
        .encrypt(&pt, &w.public)
        .unwrap();
    let ct = Evaluator::new(&w.context)
        .level_down(&ct, Level(3))
        .unwrap();
    (ct, values)
}

fn bootstrapped_words(w: &World, keys: BootstrapKeys, sse: bool, ct: &Ciphertext) -> Vec<Vec<u64>> {
    let bootstrapper = Bootstrapper::new(&w.context, schedule(&w.context, sse), keys).unwrap();
    let out = bootstrapper.bootstrap_real(ct).unwrap();
    let values = Encoder::new(&w.context)
        .decode(&Decryptor::new(&w.context).decrypt(&out, &w.secret).unwrap())
        .unwrap();
    assert_eq!(values.len(), w.context.params().slots());
    vec![
        out.parts().0.to_words().unwrap(),
        out.parts().1.to_words().unwrap(),
    ]
}

#[test]
fn bootstrap_keys_round_trip_bootstrap_identically_and_refuse_damage() {
    let w = world(Preset::TestFGb, 11);
    let keys = BootstrapKeys::generate(&w.keygen, &w.secret, &schedule(&w.context, true)).unwrap();
    assert!(keys.has_sse_keys());
    let file = saved(&keys);
    // Compact: about half the bytes of keys held expanded, never more than
    // the keys hold plus a little framing.
    let held = keys.size_bytes();
    assert!(
        file.len() <= held + held / 100 + 4096,
        "{} vs {held}",
        file.len()
    );
    eprintln!(
        "test-FGb bootstrap keys: {} keys, {held} bytes held, file {} bytes",
        keys.len(),
        file.len()
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("boot.hemem");
    keys.save_to_path(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), file);
    let loaded = BootstrapKeys::load_from_path(&w.context, &path).unwrap();
    assert_eq!(loaded.len(), keys.len());
    assert!(loaded.has_sse_keys());
    // Every limb, seed, level and Galois element came back.
    assert_eq!(saved(&loaded), file);

    refuses_damaged_and_foreign_files(&w, &keys, &file);

    let (ct, _) = input(&w, 12);
    let with_loaded = bootstrapped_words(&w, loaded, true, &ct);
    let with_original = bootstrapped_words(&w, keys, true, &ct);
    assert_eq!(with_loaded, with_original);
}

#[test]
fn bootstrap_keys_without_sse_round_trip() {
    let w = world(Preset::TestFGb, 13);
    let keys = BootstrapKeys::generate(
        &w.keygen,
        &w.secret,
        &schedule_with_slots(&w.context, false, Some(4)),
    )
    .unwrap();
    assert!(!keys.has_sse_keys());
    let file = saved(&keys);
    let loaded = BootstrapKeys::load(&w.context, file.as_slice()).unwrap();
    assert!(!loaded.has_sse_keys());
    assert_eq!(saved(&loaded), file);
    // A file without SSE keys cannot serve a schedule that needs them.
    assert!(
        Bootstrapper::new(
            &w.context,
            schedule_with_slots(&w.context, true, Some(4)),
            loaded
        )
        .is_err()
    );
}

/// Damaged and foreign files: typed errors.
fn refuses_damaged_and_foreign_files(w: &World, keys: &BootstrapKeys, file: &[u8]) {
    let file = file.to_vec();
    let load = |bytes: &[u8]| BootstrapKeys::load(&w.context, bytes);
    let mut rng = seeded_rng(14);

    // Flipped bytes and cuts anywhere.
    for _ in 0..4 {
        let at = 20 + (rng.next_u64() as usize) % (file.len() - 20);
        let mut bad = file.clone();
        bad[at] ^= 0x10;
        let e = serialization_error(load(&bad));
        assert!(
            matches!(
                e,
                SerializationError::Corrupted | SerializationError::Truncated { .. }
            ),
            "{at}: {e:?}"
        );
        let cut = (rng.next_u64() as usize) % file.len();
        assert!(matches!(
            serialization_error(load(&file[..cut])),
            SerializationError::Truncated { .. }
        ));
    }
    let mut header = file.clone();
    header[12] ^= 1;
    assert_eq!(
        serialization_error(load(&header)),
        SerializationError::Corrupted
    );
    // Flags this build does not understand (none is defined), with the
    // header checksum recomputed.
    let mut flagged = file.clone();
    flagged[7] = 0x01;
    assert_eq!(
        serialization_error(load(&reseal_for_tests(&flagged))),
        SerializationError::UnknownFlags { flags: 1 }
    );
    let mut old = file.clone();
    old[4..6].copy_from_slice(&1u16.to_le_bytes());
    assert_eq!(
        serialization_error(load(&old)),
        SerializationError::UnsupportedVersion {
            version: 1,
            supported: FORMAT_VERSION
        }
    );

    // Keys of another test preset.
    let other = Context::new(
        Parameters::from_preset_with(Preset::TestFTb, SecurityCheck::AllowInsecure).unwrap(),
        DeviceSelection::Cpu,
    )
    .unwrap();
    assert!(matches!(
        serialization_error(BootstrapKeys::load(&other, file.as_slice())),
        SerializationError::ParameterMismatch { .. }
    ));
    // Another kind either way.
    assert!(matches!(
        serialization_error(load(&keys.key_set().to_bytes_compressed().unwrap())),
        SerializationError::WrongKind {
            expected: "bootstrap key set",
            found: "key set"
        }
    ));
    assert!(matches!(
        KeySet::from_bytes(&w.context, &file),
        Err(CkksError::Serialization(SerializationError::WrongKind {
            expected: "key set",
            found: "bootstrap key set"
        }))
    ));

    // Valid checksums over invalid fields: the SSE flag; an SSE key that is
    // not a generic key (its kind byte follows the key set's records).
    let invalid = |field: &'static str| SerializationError::InvalidField { field };
    assert_eq!(
        serialization_error(load(&patch_payload_for_tests(&file, 0, &[2]))),
        invalid("sse flag")
    );
    let payload = payload_for_tests(&file);
    let key_set_bytes = payload_for_tests(&keys.key_set().to_bytes_compressed().unwrap());
    let sse_kind = 1 + key_set_bytes.len();
    assert_eq!(payload[sse_kind], 3, "a generic key's kind byte");
    assert_eq!(
        serialization_error(load(&patch_payload_for_tests(&file, sse_kind, &[0]))),
        invalid("sse key kind")
    );
    // No SSE keys announced, but they follow: trailing bytes.
    assert!(matches!(
        serialization_error(load(&patch_payload_for_tests(&file, 0, &[0]))),
        SerializationError::TrailingBytes { .. }
    ));
}
