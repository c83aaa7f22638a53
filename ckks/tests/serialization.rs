//! Serialization round trips for every object, and truncated or corrupted
//! input fed to every loader.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Arc;

use hemem_ckks::keys::KeyKind;
use hemem_ckks::ntt::GaloisElement;
use hemem_ckks::prelude::*;
use hemem_ckks::serialize::{
    FORMAT_VERSION, FromBytes, Kind, Load, Save, ToBytes, Writer, patch_payload_for_tests,
    payload_for_tests, reseal_for_tests,
};
use hemem_ckks::testing::fuzz::frame_starts;
use hemem_ckks::testing::{max_abs_error, seed32, seeded_rng, unit_disk};
use hemem_ckks::{Error, SerializationError};
use rand_core::Rng;

struct World {
    context: Context,
    secret: SecretKey,
    public: PublicKey,
    keys: KeySet,
    plaintext: Plaintext,
    ciphertext: Ciphertext,
}

fn world(seed: u64) -> World {
    let params =
        Parameters::from_preset_with(Preset::TestFTb, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params, DeviceSelection::Cpu).unwrap();
    let keygen = KeyGenerator::with_seed(&context, seed32(seed));
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let keys = keygen
        .key_set(
            &secret,
            &KeySetRequest {
                relinearization: true,
                conjugation: true,
                rotations: vec![1, -4],
                ..Default::default()
            },
        )
        .unwrap();
    let values = unit_disk(&mut seeded_rng(seed), context.params().slots());
    let plaintext = Encoder::new(&context).encode(&values).unwrap();
    let ciphertext = Encryptor::with_seed(&context, seed32(seed + 1))
        .encrypt(&plaintext, &public)
        .unwrap();
    World {
        context,
        secret,
        public,
        keys,
        plaintext,
        ciphertext,
    }
}

fn words(p: &hemem_ckks::poly::RnsPoly<hemem_ckks::poly::Ntt>) -> Vec<u64> {
    p.to_words().unwrap()
}

#[test]
fn every_object_round_trips() {
    let w = world(1);
    let params = w.context.params();
    let p2 =
        Parameters::from_bytes(&params.to_bytes().unwrap(), SecurityCheck::AllowInsecure).unwrap();
    assert_eq!(&p2, params);
    assert!(matches!(
        Parameters::from_bytes(&params.to_bytes().unwrap(), SecurityCheck::Enforce),
        Err(Error::Parameters(
            hemem_ckks::ParametersError::Insecure { .. }
        ))
    ));
    let real = Parameters::from_preset(Preset::FTb).unwrap();
    assert_eq!(
        Parameters::from_bytes(&real.to_bytes().unwrap(), SecurityCheck::Enforce).unwrap(),
        real
    );

    let sk = SecretKey::from_bytes(&w.context, &w.secret.to_bytes().unwrap()).unwrap();
    assert_eq!(sk.coefficients(), w.secret.coefficients());
    assert_eq!(words(sk.poly()), words(w.secret.poly()));

    let pk = PublicKey::from_bytes(&w.context, &w.public.to_bytes().unwrap()).unwrap();
    assert_eq!(words(pk.parts().0), words(w.public.parts().0));
    assert_eq!(words(pk.parts().1), words(w.public.parts().1));

    let pt = Plaintext::from_bytes(&w.context, &w.plaintext.to_bytes().unwrap()).unwrap();
    assert_eq!(
        words(pt.poly().unwrap()),
        words(w.plaintext.poly().unwrap())
    );
    assert_eq!(
        (pt.level(), pt.scale(), pt.slots()),
        (
            w.plaintext.level(),
            w.plaintext.scale(),
            w.plaintext.slots()
        )
    );

    let ct = Ciphertext::from_bytes(&w.context, &w.ciphertext.to_bytes().unwrap()).unwrap();
    assert_eq!(words(ct.parts().0), words(w.ciphertext.parts().0));
    assert_eq!(words(ct.parts().1), words(w.ciphertext.parts().1));
    assert_eq!(
        (ct.level(), ct.scale(), ct.slots()),
        (
            w.ciphertext.level(),
            w.ciphertext.scale(),
            w.ciphertext.slots()
        )
    );

    // Key sets, compressed (as made) and expanded; both give the same results.
    let compressed = w.keys.to_bytes().unwrap();
    let mut expanded = KeySet::from_bytes(&w.context, &compressed).unwrap();
    for key in expanded.keys_mut() {
        key.expand().unwrap();
    }
    let full = expanded.to_bytes().unwrap();
    assert!(
        compressed.len() * 2 < full.len() + 4096,
        "{} vs {}",
        compressed.len(),
        full.len()
    );
    let k_full = KeySet::from_bytes(&w.context, &full).unwrap();
    let mut k_comp = KeySet::from_bytes(&w.context, &compressed).unwrap();
    assert_eq!(k_full.len(), w.keys.len());
    assert!(k_comp.keys().all(SwitchingKey::is_compressed));
    let eval_full = Evaluator::with_keys(&w.context, Arc::new(k_full));
    let a = eval_full.rotate(&w.ciphertext, -4).unwrap();
    for key in k_comp.keys_mut() {
        key.expand().unwrap();
    }
    let eval_comp = Evaluator::with_keys(&w.context, Arc::new(k_comp));
    let b = eval_comp.rotate(&w.ciphertext, -4).unwrap();
    assert_eq!(words(a.parts().0), words(b.parts().0));
    assert_eq!(words(a.parts().1), words(b.parts().1));

    // A single switching key.
    let relin = w.keys.relinearization_key().unwrap();
    let again = SwitchingKey::from_bytes(&w.context, &relin.to_bytes().unwrap()).unwrap();
    assert_eq!(again.kind(), relin.kind());
    let again =
        SwitchingKey::from_bytes(&w.context, &relin.to_bytes_compressed().unwrap()).unwrap();
    assert!(again.is_compressed());

    // Decrypting the loaded ciphertext with the loaded key gives the message.
    let encoder = Encoder::new(&w.context);
    let out = encoder
        .decode(&Decryptor::new(&w.context).decrypt(&ct, &sk).unwrap())
        .unwrap();
    let reference = encoder.decode(&w.plaintext).unwrap();
    assert!(max_abs_error(&out, &reference) < 1e-5);
}

/// Every loader, on bytes of every object.
fn load_all(context: &Context, bytes: &[u8]) -> Vec<Result<(), Error>> {
    vec![
        Parameters::from_bytes(bytes, SecurityCheck::AllowInsecure).map(|_| ()),
        SecretKey::from_bytes(context, bytes).map(|_| ()),
        PublicKey::from_bytes(context, bytes).map(|_| ()),
        SwitchingKey::from_bytes(context, bytes).map(|_| ()),
        KeySet::from_bytes(context, bytes).map(|_| ()),
        Plaintext::from_bytes(context, bytes).map(|_| ()),
        Ciphertext::from_bytes(context, bytes).map(|_| ()),
    ]
}

#[test]
fn truncated_and_corrupted_data_give_errors_never_panics() {
    let w = world(2);
    let blobs: Vec<Vec<u8>> = vec![
        w.context.params().to_bytes().unwrap(),
        w.secret.to_bytes().unwrap().to_vec(),
        w.public.to_bytes().unwrap(),
        w.keys
            .relinearization_key()
            .unwrap()
            .to_bytes_compressed()
            .unwrap(),
        w.keys.to_bytes_compressed().unwrap(),
        w.plaintext.to_bytes().unwrap(),
        w.ciphertext.to_bytes().unwrap(),
    ];
    let mut rng = seeded_rng(2);
    for (i, blob) in blobs.iter().enumerate() {
        // Each blob loads with its own loader only.
        let results = load_all(&w.context, blob);
        for (j, r) in results.iter().enumerate() {
            assert_eq!(r.is_ok(), i == j, "blob {i} loader {j}: {r:?}");
        }
        // Truncations.
        for _ in 0..40 {
            let cut = (rng.next_u64() as usize) % blob.len();
            for r in load_all(&w.context, &blob[..cut]) {
                assert!(r.is_err());
            }
        }
        // Random byte flips: the checksum or a header check catches them.
        for _ in 0..40 {
            let mut bad = blob.clone();
            let at = (rng.next_u64() as usize) % bad.len();
            bad[at] ^= 1 + (rng.next_u32() % 255) as u8;
            for r in load_all(&w.context, &bad) {
                assert!(r.is_err(), "blob {i} flip at {at}");
            }
        }
        // Trailing garbage.
        let mut long = blob.clone();
        long.extend_from_slice(&[0, 1, 2]);
        assert!(load_all(&w.context, &long).iter().all(Result::is_err));
    }
    // Specific errors.
    assert!(matches!(
        Ciphertext::from_bytes(
            &w.context,
            b"nonsense data that is long enough to have a header"
        ),
        Err(Error::Serialization(SerializationError::BadMagic))
    ));
    let ct = &blobs[6];
    assert!(matches!(
        Plaintext::from_bytes(&w.context, ct),
        Err(Error::Serialization(SerializationError::WrongKind { .. }))
    ));
    for version in [1u8, 2, 3, 5] {
        let mut old = ct.clone();
        old[4] = version;
        assert_eq!(
            Ciphertext::from_bytes(&w.context, &old).unwrap_err(),
            Error::Serialization(SerializationError::UnsupportedVersion {
                version: u16::from(version),
                supported: FORMAT_VERSION,
            })
        );
    }
    assert!(matches!(
        Ciphertext::from_bytes(&w.context, &ct[..ct.len() - 1]),
        Err(Error::Serialization(SerializationError::Truncated { .. }))
    ));
    let mut flipped = ct.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x40;
    assert!(matches!(
        Ciphertext::from_bytes(&w.context, &flipped),
        Err(Error::Serialization(SerializationError::Corrupted))
    ));
    // Another context with other parameters.
    let other = Context::new(
        Parameters::from_preset_with(Preset::TestFTa, SecurityCheck::AllowInsecure).unwrap(),
        DeviceSelection::Cpu,
    )
    .unwrap();
    assert!(matches!(
        Ciphertext::from_bytes(&other, ct),
        Err(Error::Serialization(
            SerializationError::ParameterMismatch { .. }
        ))
    ));
}

/// Valid checksums over invalid values: the field checks catch them.
#[test]
fn out_of_range_values_with_valid_checksums_are_refused() {
    let w = world(3);
    let ct = w.ciphertext.to_bytes().unwrap();
    let invalid = |field: &'static str| {
        Err::<(), _>(Error::Serialization(SerializationError::InvalidField {
            field,
        }))
    };
    let load_ct = |bytes: &[u8]| Ciphertext::from_bytes(&w.context, bytes).map(|_| ());
    // Level beyond the chain: the first payload field.
    let bad = patch_payload_for_tests(&ct, 0, &99u32.to_le_bytes());
    assert_eq!(load_ct(&bad), invalid("level"));
    // A residue at or above its prime.
    let first_word = 4 + 8 + 4 + 4 + 4 * (w.ciphertext.level().get() + 1);
    let bad = patch_payload_for_tests(&ct, first_word, &u64::MAX.to_le_bytes());
    assert_eq!(load_ct(&bad), invalid("residue"));
    // A modulus index out of place.
    let bad = patch_payload_for_tests(&ct, 4 + 8 + 4 + 4 + 4, &7u32.to_le_bytes());
    assert_eq!(load_ct(&bad), invalid("modulus index"));
    // A secret coefficient that is not ternary.
    let sk = patch_payload_for_tests(&w.secret.to_bytes().unwrap(), 4 + 40, &[7]);
    assert_eq!(
        SecretKey::from_bytes(&w.context, &sk).map(|_| ()),
        invalid("secret coefficient")
    );
    // Non-power-of-two slots.
    let bad = patch_payload_for_tests(&ct, 12, &3u32.to_le_bytes());
    assert_eq!(load_ct(&bad), invalid("slots"));
    // Nonzero flags.
    let mut flagged = ct.clone();
    flagged[7] = 1;
    assert_eq!(
        load_ct(&reseal_for_tests(&flagged)),
        Err(Error::Serialization(SerializationError::UnknownFlags {
            flags: 1
        }))
    );
    // An unknown kind byte.
    let mut kind = ct.clone();
    kind[6] = 200;
    assert_eq!(load_ct(&reseal_for_tests(&kind)), invalid("kind"));
    // A resealed fingerprint of other parameters.
    let mut fp = ct.clone();
    fp[8] ^= 1;
    assert!(matches!(
        load_ct(&reseal_for_tests(&fp)),
        Err(Error::Serialization(
            SerializationError::ParameterMismatch { .. }
        ))
    ));
}

/// A reader that hands out at most `chunk` bytes per call.
struct Trickle<'a> {
    bytes: &'a [u8],
    chunk: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.chunk.min(buf.len()).min(self.bytes.len());
        buf[..k].copy_from_slice(&self.bytes[..k]);
        self.bytes = &self.bytes[k..];
        Ok(k)
    }
}

fn rotate_words(context: &Context, keys: KeySet, ct: &Ciphertext) -> Vec<Vec<u64>> {
    let eval = Evaluator::with_keys(context, Arc::new(keys));
    let mut out = Vec::new();
    for c in [
        eval.rotate(ct, -4).unwrap(),
        eval.rotate(ct, 1).unwrap(),
        eval.conjugate(ct).unwrap(),
        eval.mult(ct, ct).unwrap(),
    ] {
        out.push(words(c.parts().0));
        out.push(words(c.parts().1));
    }
    out
}

#[test]
fn key_sets_stream_in_compact_form_bit_identical() {
    let w = world(4);
    let params = w.context.params();
    let mut file = Vec::new();
    w.keys.save(&mut file).unwrap();
    // Compact: b and the seed only, whatever the keys hold in memory.
    let n = params.degree().get();
    let b_bytes: usize = w
        .keys
        .keys()
        .map(|k| {
            k.digits()
                * params
                    .qp_indices(k.level())
                    .expect("a level of the chain")
                    .len()
                * n
                * 8
        })
        .sum();
    assert!(file.len() > b_bytes && file.len() < b_bytes + b_bytes / 100);
    // Several frames: words straddle frame boundaries.
    assert!(file.len() > 3 << 20, "{}", file.len());

    let loaded = KeySet::load(&w.context, file.as_slice()).unwrap();
    assert_eq!(loaded.len(), w.keys.len());
    for (a, b) in loaded.keys().zip(w.keys.keys()) {
        assert_eq!(
            (a.kind(), a.seed(), a.digits(), a.level()),
            (b.kind(), b.seed(), b.digits(), b.level())
        );
        assert!(a.is_compressed());
    }
    // Saving the loaded set gives the same bytes: every limb came back.
    let mut again = Vec::new();
    loaded.save(&mut again).unwrap();
    assert_eq!(again, file);
    // Through a reader that returns a few bytes at a time.
    let trickled = KeySet::load(
        &w.context,
        Trickle {
            bytes: &file,
            chunk: 7,
        },
    )
    .unwrap();
    assert_eq!(trickled.to_bytes_compressed().unwrap(), file);
    // Loaded keys compute exactly what the originals compute.
    let original = KeySet::from_bytes(&w.context, &w.keys.to_bytes().unwrap()).unwrap();
    assert_eq!(
        rotate_words(&w.context, loaded, &w.ciphertext),
        rotate_words(&w.context, original, &w.ciphertext)
    );
}

#[test]
fn key_files_round_trip_through_paths_with_secret_mode() {
    let w = world(5);
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.hemem");
    let secret = dir.path().join("keys.hemem.secret");
    let public = dir.path().join("keys.hemem.public");
    w.keys.save_to_path(&keys).unwrap();
    w.secret.save_to_path(&secret).unwrap();
    w.public.save_to_path(&public).unwrap();
    // Nothing else left behind (the temporary files were renamed).
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["keys.hemem", "keys.hemem.public", "keys.hemem.secret"]
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        // Overwriting keeps the owner-only mode.
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        w.secret.save_to_path(&secret).unwrap();
        let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let sk = SecretKey::load_from_path(&w.context, &secret).unwrap();
    assert_eq!(sk.coefficients(), w.secret.coefficients());
    let pk = PublicKey::load_from_path(&w.context, &public).unwrap();
    assert_eq!(words(pk.parts().0), words(w.public.parts().0));
    assert_eq!(words(pk.parts().1), words(w.public.parts().1));
    let loaded = KeySet::load_from_path(&w.context, &keys).unwrap();
    assert_eq!(
        loaded.to_bytes_compressed().unwrap(),
        std::fs::read(&keys).unwrap()
    );
    // A missing file is a typed I/O error.
    assert_eq!(
        KeySet::load_from_path(&w.context, dir.path().join("absent")).unwrap_err(),
        Error::Serialization(SerializationError::Io {
            kind: std::io::ErrorKind::NotFound
        })
    );
}

/// One API for every object (`serialize`'s table): saving takes no
/// context, through a writer, a path or bytes alike, and loading takes the
/// context (parameters take the security decision instead); an empty key
/// set and a set of mixed parameters are refused, and the secret key keeps
/// its owner-only, zeroizing writer.
#[test]
fn every_object_saves_without_a_context_through_one_api() {
    let w = world(13);
    let dir = tempfile::tempdir().unwrap();

    // Writer, path and bytes give the same bytes for each object.
    fn same_three_ways<T: Save>(object: &T, path: &std::path::Path) -> Vec<u8> {
        let mut written = Vec::new();
        object.save(&mut written).unwrap();
        object.save_to_path(path).unwrap();
        assert_eq!(std::fs::read(path).unwrap(), written);
        assert_eq!(object.to_bytes().unwrap(), written);
        written
    }
    let params = same_three_ways(w.context.params(), &dir.path().join("params"));
    let from_reader = Parameters::load(params.as_slice(), SecurityCheck::AllowInsecure).unwrap();
    let from_path =
        Parameters::load_from_path(dir.path().join("params"), SecurityCheck::AllowInsecure)
            .unwrap();
    assert_eq!(&from_reader, w.context.params());
    assert_eq!(from_path, from_reader);

    let set = same_three_ways(&w.keys, &dir.path().join("keys"));
    let loaded = <KeySet as Load>::load_from_path(&w.context, dir.path().join("keys")).unwrap();
    assert_eq!(loaded.to_bytes().unwrap(), set);
    // Keys generated compressed: saved as held is the compact form.
    assert_eq!(w.keys.to_bytes_compressed().unwrap(), set);
    let ct = same_three_ways(&w.ciphertext, &dir.path().join("ct"));
    assert_eq!(
        Ciphertext::from_bytes(&w.context, &ct)
            .unwrap()
            .to_bytes()
            .unwrap(),
        ct
    );

    // The secret key: the same shapes, through Load to read.
    let mut written = Vec::new();
    w.secret.save(&mut written).unwrap();
    assert_eq!(*w.secret.to_bytes().unwrap(), written);
    let sk = <SecretKey as FromBytes>::from_bytes(&w.context, &written).unwrap();
    assert_eq!(sk.coefficients(), w.secret.coefficients());

    // The empty set has no parameters: refused, as an empty key file is.
    for result in [
        KeySet::new().to_bytes(),
        KeySet::new().to_bytes_compressed(),
        KeySet::new().save(&mut Vec::new()).map(|()| Vec::new()),
    ] {
        assert_eq!(
            result.unwrap_err(),
            Error::Serialization(SerializationError::InvalidField { field: "key count" })
        );
    }
    // An empty set written before (a key count of 0) still loads.
    let other = Context::new(
        Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap(),
        DeviceSelection::Cpu,
    )
    .unwrap();
    let mut empty = Vec::new();
    let mut writer =
        Writer::new(&mut empty, Kind::KeySet, w.context.params().fingerprint()).unwrap();
    writer.u32(0).unwrap();
    writer.finish().unwrap();
    assert!(KeySet::from_bytes(&w.context, &empty).unwrap().is_empty());
    // Keys of two parameter sets in one set: refused.
    let foreign = KeyGenerator::with_seed(&other, seed32(130));
    let foreign_secret = foreign.secret_key().unwrap();
    let mut mixed = KeySet::new();
    mixed
        .insert(foreign.conjugation_key(&foreign_secret).unwrap())
        .unwrap();
    mixed
        .insert(
            KeyGenerator::with_seed(&w.context, seed32(131))
                .relinearization_key(&w.secret)
                .unwrap(),
        )
        .unwrap();
    assert!(matches!(
        mixed.to_bytes(),
        Err(Error::Serialization(
            SerializationError::ParameterMismatch { .. }
        ))
    ));
}

fn serialization_error(r: Result<KeySet, Error>) -> SerializationError {
    match r {
        Err(Error::Serialization(e)) => e,
        other => panic!("expected a serialization error, got {other:?}"),
    }
}

#[test]
fn key_set_files_refuse_corruption_truncation_and_other_parameters() {
    let w = world(6);
    let keygen = KeyGenerator::with_seed(&w.context, seed32(60));
    let mut small = KeySet::new();
    small
        .insert(keygen.relinearization_key(&w.secret).unwrap())
        .unwrap();
    let mut file = Vec::new();
    small.save(&mut file).unwrap();
    let starts = frame_starts(&file);
    assert!(starts.len() >= 4, "several frames and the end marker");
    let load = |bytes: &[u8]| KeySet::load(&w.context, bytes);
    let mut rng = seeded_rng(6);

    // A flipped byte: in the header, a typed header error; anywhere else,
    // the frame's checksum (or a length field sending the reader past the
    // end) catches it before any field is parsed.
    let mut positions: Vec<usize> = (0..40).collect();
    for &s in &starts {
        positions.extend(s..s + 4);
        positions.extend(s + 4..(s + 12).min(file.len()));
    }
    positions.extend(file.len() - 8..file.len());
    positions.extend((0..60).map(|_| (rng.next_u64() as usize) % file.len()));
    for at in positions {
        let mut bad = file.clone();
        bad[at] ^= 1 << (rng.next_u32() % 8);
        let e = serialization_error(load(&bad));
        match at {
            0..4 => assert_eq!(e, SerializationError::BadMagic),
            4..6 => assert!(
                matches!(e, SerializationError::UnsupportedVersion { .. }),
                "{at}: {e:?}"
            ),
            6..20 => assert_eq!(e, SerializationError::Corrupted, "{at}"),
            _ if starts.iter().any(|&s| (s..s + 4).contains(&at)) => assert!(
                matches!(
                    e,
                    SerializationError::Corrupted | SerializationError::Truncated { .. }
                ),
                "{at}: {e:?}"
            ),
            _ => assert_eq!(e, SerializationError::Corrupted, "{at}"),
        }
    }

    // Truncated anywhere: a typed truncation.
    let mut cuts: Vec<usize> = (0..64).collect();
    for &s in &starts {
        cuts.extend(s.saturating_sub(3)..(s + 12).min(file.len()));
    }
    cuts.extend(file.len() - 8..file.len());
    cuts.extend((0..40).map(|_| (rng.next_u64() as usize) % file.len()));
    for cut in cuts {
        let e = serialization_error(load(&file[..cut]));
        assert!(
            matches!(e, SerializationError::Truncated { .. }),
            "cut at {cut}: {e:?}"
        );
    }

    // Trailing bytes, another test preset, another kind, an old version.
    let mut long = file.clone();
    long.extend_from_slice(&[9, 8, 7]);
    assert_eq!(
        serialization_error(load(&long)),
        SerializationError::TrailingBytes { extra: 3 }
    );
    let other = Context::new(
        Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure).unwrap(),
        DeviceSelection::Cpu,
    )
    .unwrap();
    assert!(matches!(
        serialization_error(KeySet::load(&other, file.as_slice())),
        SerializationError::ParameterMismatch { .. }
    ));
    assert!(matches!(
        PublicKey::from_bytes(&w.context, &file),
        Err(Error::Serialization(SerializationError::WrongKind {
            expected: "public key",
            found: "key set"
        }))
    ));
    assert!(matches!(
        serialization_error(load(&w.public.to_bytes().unwrap())),
        SerializationError::WrongKind { .. }
    ));
    let mut v1 = file.clone();
    v1[4..6].copy_from_slice(&1u16.to_le_bytes());
    assert_eq!(
        serialization_error(load(&v1)),
        SerializationError::UnsupportedVersion {
            version: 1,
            supported: FORMAT_VERSION
        }
    );
    // Random data, with and without the magic.
    let mut noise = vec![0u8; 4096];
    for b in &mut noise {
        *b = rng.next_u32() as u8;
    }
    assert!(load(&noise).is_err());
    noise[..4].copy_from_slice(b"HEMM");
    assert!(load(&noise).is_err());
}

#[test]
fn key_records_with_valid_checksums_are_checked_field_by_field() {
    let w = world(7);
    let keygen = KeyGenerator::with_seed(&w.context, seed32(70));
    let mut small = KeySet::new();
    small
        .insert(keygen.relinearization_key(&w.secret).unwrap())
        .unwrap();
    let mut file = Vec::new();
    small.save(&mut file).unwrap();
    let load = |bytes: &[u8]| KeySet::load(&w.context, bytes).map(|_| ());
    let invalid = |field: &'static str| {
        Err::<(), _>(Error::Serialization(SerializationError::InvalidField {
            field,
        }))
    };
    // Payload: count @0; key: tag @4, Galois element @5, seed @13..45,
    // level @45, digits @49, uniform byte @53 (bit 0: halves stored; bits
    // 1–7: the seed's PRF), first polynomial @54.
    let patch = |at: usize, with: &[u8]| patch_payload_for_tests(&file, at, with);
    assert_eq!(
        load(&patch(0, &u32::MAX.to_le_bytes())),
        invalid("key count")
    );
    let mismatch = |kind: &'static str, element: u64| {
        Err::<(), _>(Error::Serialization(
            SerializationError::GaloisElementMismatch { kind, element },
        ))
    };
    assert_eq!(load(&patch(4, &[1])), mismatch("rotation", 0));
    assert_eq!(load(&patch(4, &[9])), invalid("key kind"));
    assert_eq!(
        load(&patch(5, &3u64.to_le_bytes())),
        mismatch("relinearisation", 3)
    );
    assert_eq!(load(&patch(45, &99u32.to_le_bytes())), invalid("key level"));
    assert_eq!(load(&patch(49, &1u32.to_le_bytes())), invalid("digits"));
    assert_eq!(load(&patch(53, &[4]),), invalid("uniform PRF"));
    assert_eq!(load(&patch(53, &[5]),), invalid("uniform PRF"));
    assert_eq!(load(&patch(54, &3u32.to_le_bytes())), invalid("limb count"));
    assert_eq!(
        load(&patch(58, &1u32.to_le_bytes())),
        invalid("modulus index")
    );
    let limbs = w
        .context
        .params()
        .qp_indices(small.keys().next().unwrap().level())
        .expect("a level of the chain")
        .len();
    let first_word = 58 + 4 * limbs;
    assert_eq!(
        load(&patch(first_word, &u64::MAX.to_le_bytes())),
        invalid("residue")
    );
    // A rotation element that is even, or the identity.
    let rotation = patch(4, &[1]);
    let rotation = patch_payload_for_tests(&rotation, 5, &4u64.to_le_bytes());
    assert_eq!(load(&rotation), mismatch("rotation", 4));
    // A generic key inside a set.
    assert!(matches!(
        load(&patch(4, &[3])),
        Err(Error::Key(hemem_ckks::KeyError::WrongKey { .. }))
    ));
    // The same key twice; a payload longer or shorter than its records.
    let payload = payload_for_tests(&file);
    let record = &payload[4..];
    let craft = |body: &[u8]| {
        let mut out = Vec::new();
        let mut wr = Writer::new(&mut out, Kind::KeySet, w.context.params().fingerprint()).unwrap();
        wr.bytes(body).unwrap();
        wr.finish().unwrap();
        out
    };
    let mut twice = 2u32.to_le_bytes().to_vec();
    twice.extend_from_slice(record);
    twice.extend_from_slice(record);
    assert_eq!(
        load(&craft(&twice)),
        Err(Error::Serialization(SerializationError::DuplicateKey {
            kind: "relinearisation",
            element: 0
        }))
    );
    let mut longer = payload.clone();
    longer.extend_from_slice(&[1, 2]);
    assert_eq!(
        load(&craft(&longer)),
        Err(Error::Serialization(SerializationError::TrailingBytes {
            extra: 2
        }))
    );
    assert!(matches!(
        load(&craft(&payload[..payload.len() - 5])),
        Err(Error::Serialization(SerializationError::Truncated { .. }))
    ));
    assert_eq!(load(&craft(&payload)), Ok(()));
}

/// Keys expand their seeds with ChaCha12 unless made with ChaCha20, and the
/// record says which: ChaCha20 keys are written exactly as earlier builds
/// wrote them (uniform byte 0 or 1), ChaCha12 keys set bit 1. Both
/// relinearise correctly on a product, compact and full; the PRF read back
/// is the one that made the key (a ChaCha12 key relabelled ChaCha20 is
/// another key, and its product decrypts to noise).
#[test]
fn keys_record_the_prf_that_expands_their_seed() {
    use hemem_ckks::sampling::SeedPrf;
    let w = world(8);
    let encoder = Encoder::new(&w.context);
    let decrypt = |ct: &Ciphertext| {
        encoder
            .decode(&Decryptor::new(&w.context).decrypt(ct, &w.secret).unwrap())
            .unwrap()
    };
    let input = decrypt(&w.ciphertext);
    let expected: Vec<_> = input.iter().map(|x| x * x).collect();
    let product_error = |key: SwitchingKey| {
        let mut keys = KeySet::new();
        keys.insert(key).unwrap();
        let eval = Evaluator::with_keys(&w.context, Arc::new(keys));
        let product = eval.mult(&w.ciphertext, &w.ciphertext).unwrap();
        max_abs_error(&decrypt(&product), &expected)
    };
    // Payload of a lone key: tag @0, Galois element @1, seed @9..41, level
    // @41, digits @45, uniform byte @49.
    for (prf, byte) in [(SeedPrf::ChaCha12, 2u8), (SeedPrf::ChaCha20, 0)] {
        let keygen = KeyGenerator::with_seed(&w.context, seed32(80)).with_uniform_prf(prf);
        let key = keygen.relinearization_key(&w.secret).unwrap();
        assert_eq!(key.seed().prf, prf);
        let compact = key.to_bytes_compressed().unwrap();
        assert_eq!(payload_for_tests(&compact)[49], byte, "{prf:?}");
        let loaded = SwitchingKey::from_bytes(&w.context, &compact).unwrap();
        assert_eq!(loaded.seed(), key.seed());
        let mut full = SwitchingKey::from_bytes(&w.context, &compact).unwrap();
        full.expand().unwrap();
        let full_bytes = full.to_bytes().unwrap();
        assert_eq!(payload_for_tests(&full_bytes)[49], byte | 1, "{prf:?}");
        let full = SwitchingKey::from_bytes(&w.context, &full_bytes).unwrap();
        assert!(!full.is_compressed());
        for (form, key) in [("compact", loaded), ("full", full)] {
            let error = product_error(key);
            assert!(error < 1e-3, "{prf:?} {form}: error {error}");
        }
    }
    let keygen = KeyGenerator::with_seed(&w.context, seed32(81));
    let key = keygen.relinearization_key(&w.secret).unwrap();
    let relabelled = patch_payload_for_tests(&key.to_bytes_compressed().unwrap(), 49, &[0]);
    let wrong = SwitchingKey::from_bytes(&w.context, &relabelled).unwrap();
    assert_eq!(wrong.seed().prf, SeedPrf::ChaCha20);
    let error = product_error(wrong);
    assert!(error > 1.0, "a relabelled key still relinearised: {error}");
}

/// The error of a load that must fail with a serialization error.
fn refusal<T: std::fmt::Debug>(r: Result<T, Error>) -> SerializationError {
    match r {
        Err(Error::Serialization(e)) => e,
        other => panic!("expected a serialization error, got {other:?}"),
    }
}

/// One object of every kind the ckks loaders read, in `load_all`'s order.
fn every_blob(w: &World) -> Vec<Vec<u8>> {
    vec![
        w.context.params().to_bytes().unwrap(),
        w.secret.to_bytes().unwrap().to_vec(),
        w.public.to_bytes().unwrap(),
        w.keys
            .relinearization_key()
            .unwrap()
            .to_bytes_compressed()
            .unwrap(),
        w.keys.to_bytes_compressed().unwrap(),
        w.plaintext.to_bytes().unwrap(),
        w.ciphertext.to_bytes().unwrap(),
    ]
}

/// Issue 14: the flags byte is covered by the header checksum, and every
/// loader refuses flags it does not understand (all of them, today).
#[test]
fn every_loader_refuses_unknown_flags() {
    let w = world(8);
    for (i, blob) in every_blob(&w).iter().enumerate() {
        assert_eq!(load_all(&w.context, blob)[i], Ok(()), "blob {i}");
        for flags in [1u8, 0x02, 0x80, 0xff] {
            let mut bad = blob.clone();
            bad[7] = flags;
            for (j, r) in load_all(&w.context, &bad).into_iter().enumerate() {
                assert_eq!(
                    refusal(r),
                    SerializationError::Corrupted,
                    "blob {i} loader {j}: unsealed flags {flags:#x}"
                );
            }
            let sealed = reseal_for_tests(&bad);
            let r = load_all(&w.context, &sealed).swap_remove(i);
            assert_eq!(
                refusal(r),
                SerializationError::UnknownFlags { flags },
                "blob {i}: flags {flags:#x}"
            );
        }
    }
}

/// Issue 14: a secret key is ternary with exactly the parameters' Hamming
/// weight; the all-zero key and weights h ± 1 are refused.
#[test]
fn secret_keys_need_the_parameters_hamming_weight() {
    let w = world(9);
    let sk = w.secret.to_bytes().unwrap();
    let h = w.context.params().hamming_weight();
    let coefficients = w.secret.coefficients().to_vec();
    assert_eq!(w.secret.hamming_weight(), h);
    let n = coefficients.len();
    let load = |bytes: &[u8]| SecretKey::from_bytes(&w.context, bytes).map(|_| ());
    let wrong = SerializationError::SecretKeyWeight { expected: h };
    // Payload: degree (u32), then one byte per coefficient.
    assert_eq!(
        refusal(load(&patch_payload_for_tests(&sk, 4, &vec![0; n]))),
        wrong
    );
    assert_eq!(
        refusal(load(&patch_payload_for_tests(&sk, 4, &vec![1; n]))),
        wrong
    );
    let zero = coefficients.iter().position(|&c| c == 0).unwrap();
    let nonzero = coefficients.iter().position(|&c| c != 0).unwrap();
    for (at, byte) in [(zero, 1u8), (zero, 0xff), (nonzero, 0)] {
        let bad = patch_payload_for_tests(&sk, 4 + at, &[byte]);
        assert_eq!(refusal(load(&bad)), wrong, "coefficient {at} := {byte:#x}");
    }
    // A sign flipped keeps the weight: a valid (other) key.
    let flipped = if coefficients[nonzero] == 1 { 0xff } else { 1 };
    assert_eq!(
        load(&patch_payload_for_tests(&sk, 4 + nonzero, &[flipped])),
        Ok(())
    );
    assert_eq!(load(&sk), Ok(()));
}

/// Issue 14: a switching key's kind and Galois element agree: 0 for
/// relinearisation, conjugation and generic keys; for a rotation an odd
/// element in (1, 2N) other than the conjugation element 2N − 1.
#[test]
fn switching_key_kinds_must_match_their_galois_element() {
    let w = world(10);
    let n = w.context.params().degree().get() as u64;
    let load = |bytes: &[u8]| SwitchingKey::from_bytes(&w.context, bytes).map(|_| ());
    let mismatch = |kind: &'static str, element: u64| SerializationError::GaloisElementMismatch {
        kind,
        element,
    };
    // Payload: kind @0, Galois element @1..9.
    let with = |bytes: &[u8], tag: u8, element: u64| {
        let bytes = patch_payload_for_tests(bytes, 0, &[tag]);
        patch_payload_for_tests(&bytes, 1, &element.to_le_bytes())
    };
    let relin = w
        .keys
        .relinearization_key()
        .unwrap()
        .to_bytes_compressed()
        .unwrap();
    let conj = w
        .keys
        .conjugation_key()
        .unwrap()
        .to_bytes_compressed()
        .unwrap();
    let g = GaloisElement::rotation(1, n as usize);
    let rot = w
        .keys
        .rotation_key(g)
        .unwrap()
        .to_bytes_compressed()
        .unwrap();
    for bytes in [&relin, &conj, &rot] {
        assert_eq!(load(bytes), Ok(()));
    }
    for element in [1, 5, 2 * n - 1, u64::MAX] {
        assert_eq!(
            refusal(load(&with(&relin, 0, element))),
            mismatch("relinearisation", element)
        );
        assert_eq!(
            refusal(load(&with(&conj, 2, element))),
            mismatch("conjugation", element)
        );
        assert_eq!(
            refusal(load(&with(&relin, 3, element))),
            mismatch("key switching", element)
        );
    }
    // A rotation tagged with the conjugation element, the identity, an even
    // element, or one beyond 2N.
    for element in [2 * n - 1, 1, 0, 4, 2 * n + 1, u64::MAX] {
        assert_eq!(
            refusal(load(&with(&rot, 1, element))),
            mismatch("rotation", element),
            "element {element}"
        );
    }
    // Another rotation element is a well-formed (if wrong) key.
    let other = GaloisElement::rotation(3, n as usize).0;
    assert_eq!(load(&with(&rot, 1, other)), Ok(()));
}

/// Issue 14: a key set holds each key once: a second relinearisation,
/// conjugation or same-element rotation key is refused, not silently kept.
#[test]
fn key_sets_refuse_duplicate_entries() {
    let w = world(11);
    let records: Vec<(Vec<u8>, &'static str, u64)> = w
        .keys
        .keys()
        .map(|k| {
            let element = match k.kind() {
                KeyKind::Rotation(g) => g.0,
                _ => 0,
            };
            (
                payload_for_tests(&k.to_bytes_compressed().unwrap()),
                k.kind().name(),
                element,
            )
        })
        .collect();
    assert_eq!(records.len(), 4);
    let craft = |picks: &[usize]| {
        let mut body = (picks.len() as u32).to_le_bytes().to_vec();
        for &i in picks {
            body.extend_from_slice(&records[i].0);
        }
        let mut out = Vec::new();
        let mut wr = Writer::new(&mut out, Kind::KeySet, w.context.params().fingerprint()).unwrap();
        wr.bytes(&body).unwrap();
        wr.finish().unwrap();
        out
    };
    let load = |bytes: &[u8]| KeySet::from_bytes(&w.context, bytes).map(|_| ());
    assert_eq!(load(&craft(&[0, 1, 2, 3])), Ok(()));
    for (i, (_, kind, element)) in records.iter().enumerate() {
        let others: Vec<usize> = (0..4).filter(|&j| j != i).collect();
        let mut picks = vec![i];
        picks.extend(&others);
        picks.push(i);
        assert_eq!(
            refusal(load(&craft(&picks))),
            SerializationError::DuplicateKey {
                kind,
                element: *element
            },
            "{kind} twice"
        );
    }
}

/// Issue 14: a plaintext's or ciphertext's scale lies in `[1, Q_l)` at its
/// level `l`; 5e-324 or `f64::MAX` (which decode to inf or NaN) are refused.
#[test]
fn scales_outside_one_to_the_level_modulus_are_refused() {
    let w = world(12);
    let params = w.context.params();
    let log_q = |level: usize| -> f64 {
        params.q_moduli()[..=level]
            .iter()
            .map(|q| (q.value() as f64).log2())
            .sum()
    };
    let eval = Evaluator::with_keys(
        &w.context,
        Arc::new(KeySet::from_bytes(&w.context, &w.keys.to_bytes().unwrap()).unwrap()),
    );
    // Not rescaled: scale Δ², the largest the evaluator leaves on purpose.
    let product = eval
        .mult_without_rescale(&w.ciphertext, &w.ciphertext)
        .unwrap();
    let low = eval.level_down(&w.ciphertext, Level(1)).unwrap();
    let objects: Vec<(Vec<u8>, usize, bool)> = vec![
        (
            w.plaintext.to_bytes().unwrap(),
            w.plaintext.level().get(),
            true,
        ),
        (
            w.ciphertext.to_bytes().unwrap(),
            w.ciphertext.level().get(),
            false,
        ),
        (product.to_bytes().unwrap(), product.level().get(), false),
        (low.to_bytes().unwrap(), 1, false),
    ];
    for (bytes, level, plain) in objects {
        let load = |bytes: &[u8]| {
            if plain {
                Plaintext::from_bytes(&w.context, bytes).map(|_| ())
            } else {
                Ciphertext::from_bytes(&w.context, bytes).map(|_| ())
            }
        };
        assert_eq!(load(&bytes), Ok(()), "level {level}");
        // Payload: level @0, scale @4, slots @12.
        let with = |scale: f64| patch_payload_for_tests(&bytes, 4, &scale.to_bits().to_le_bytes());
        let bits = log_q(level);
        for scale in [
            5e-324,
            f64::MIN_POSITIVE,
            0.5,
            1.0 - f64::EPSILON,
            2f64.powf(bits.ceil()),
            2f64.powf(bits + 1.0),
            f64::MAX,
        ] {
            assert_eq!(
                refusal(load(&with(scale))),
                SerializationError::ScaleOutOfRange { level },
                "scale {scale:e} at level {level}"
            );
        }
        for scale in [f64::NAN, f64::INFINITY, 0.0, -1.0, -0.0] {
            assert!(load(&with(scale)).is_err(), "scale {scale}");
        }
        for scale in [1.0, 2f64.powf(bits.floor() - 1.0)] {
            assert_eq!(
                load(&with(scale)),
                Ok(()),
                "scale {scale:e} at level {level}"
            );
        }
    }
}

/// Objects made for one parameter set are refused by a context whose
/// parameters differ in any field, the primes aside: name, slots, levels,
/// user primes, test flag, rotation count, gadget rank, weight.
#[test]
fn objects_are_refused_by_parameters_that_differ_in_any_field() {
    let w = world(11);
    let blobs: Vec<(&str, Vec<u8>)> = vec![
        ("secret key", w.secret.to_bytes().unwrap().to_vec()),
        ("public key", w.public.to_bytes().unwrap()),
        ("key set", w.keys.to_bytes().unwrap()),
        ("plaintext", w.plaintext.to_bytes().unwrap()),
        ("ciphertext", w.ciphertext.to_bytes().unwrap()),
    ];
    let base = w.context.params().spec().clone();
    let primes = base.q_bits.len();
    let seed = 0x5eed_00f1;
    let mut rng = seeded_rng(seed);
    let mut pick = |n: usize| (rng.next_u64() % n as u64) as usize;
    for field in 0..9 {
        let mut spec = base.clone();
        let what = match field {
            0 => {
                spec.name = format!("{} #{}", spec.name, pick(1000));
                "name"
            }
            1 => {
                spec.log_slots =
                    (spec.log_slots + 1 + pick(spec.log_slots as usize) as u32) % spec.log_n;
                "log_slots"
            }
            2 => {
                spec.enc_level = (spec.enc_level + 1 + pick(primes - 1)) % primes;
                "enc_level"
            }
            3 => {
                spec.post_bootstrap_level = None;
                "post_bootstrap_level"
            }
            4 => {
                spec.user_primes = (spec.user_primes + 1 + pick(primes)) % (primes + 1);
                "user_primes"
            }
            5 => {
                spec.insecure_test = false;
                "insecure_test"
            }
            6 => {
                spec.bootstrap_rotation_keys = Some(1 + pick(100));
                "bootstrap_rotation_keys"
            }
            7 => {
                spec.dnum = 1 + (spec.dnum + pick(primes - 1)) % primes;
                // FTb's dnum is its prime count: any other pairs primes
                // beyond its one 54-bit special prime, so P grows to keep
                // the parameters valid.
                spec.p_bits = vec![61; spec.q_bits.len().div_ceil(spec.dnum)];
                "dnum"
            }
            _ => {
                spec.hamming_weight += 1;
                "hamming_weight"
            }
        };
        assert_ne!(spec, base, "seed {seed}: {what}");
        let other = Context::new(
            Parameters::new(spec, SecurityCheck::AllowInsecure).unwrap(),
            DeviceSelection::Cpu,
        )
        .unwrap();
        for (object, bytes) in &blobs {
            let loaded = match *object {
                "secret key" => SecretKey::from_bytes(&other, bytes).map(|_| ()),
                "public key" => PublicKey::from_bytes(&other, bytes).map(|_| ()),
                "key set" => KeySet::from_bytes(&other, bytes).map(|_| ()),
                "plaintext" => Plaintext::from_bytes(&other, bytes).map(|_| ()),
                _ => Ciphertext::from_bytes(&other, bytes).map(|_| ()),
            };
            assert!(
                matches!(
                    loaded,
                    Err(Error::Serialization(
                        SerializationError::ParameterMismatch { .. }
                    ))
                ),
                "seed {seed}: a {object} loaded under parameters with another {what}: {loaded:?}"
            );
        }
    }
}

/// Issue 14: a full switching key's stored uniform halves `a_j` must be the
/// ones its stored seed gives. Edited `a` words, or an edited seed next to
/// stored halves, behind recomputed checksums, are refused with
/// `UniformMismatch` naming the first digit that differs, in a single key
/// and in a key set.
#[test]
fn full_keys_uniform_halves_must_match_their_seed() {
    let w = world(12);
    let relin = w.keys.relinearization_key().unwrap();
    let mut full =
        SwitchingKey::from_bytes(&w.context, &relin.to_bytes_compressed().unwrap()).unwrap();
    full.expand().unwrap();
    let bytes = full.to_bytes().unwrap();
    let load = |bytes: &[u8]| SwitchingKey::from_bytes(&w.context, bytes).map(|_| ());
    assert_eq!(load(&bytes), Ok(()));
    assert!(
        !SwitchingKey::from_bytes(&w.context, &bytes)
            .unwrap()
            .is_compressed()
    );

    let mismatch = |digit: usize| SerializationError::UniformMismatch { digit };
    // Payload: kind @0, Galois element @1, seed @9..41, level @41, digits
    // @45, uniform flag @49, then `digits` b polynomials and as many a ones,
    // each a limb count, the modulus indices and the residues.
    let digits = full.digits();
    let limbs = w
        .context
        .params()
        .qp_indices(full.level())
        .expect("a level of the chain")
        .len();
    let n = w.context.params().degree().get();
    let poly = 4 + 4 * limbs + 8 * limbs * n;
    let first_a_word = 50 + digits * poly + 4 + 4 * limbs;
    let payload = payload_for_tests(&bytes);
    assert_eq!(payload.len(), 50 + 2 * digits * poly);
    // Another residue, still below its prime.
    let other_word = |at: usize| {
        let word = u64::from_le_bytes(payload[at..at + 8].try_into().unwrap());
        word.checked_sub(1).unwrap_or(1).to_le_bytes()
    };
    let first = patch_payload_for_tests(&bytes, first_a_word, &other_word(first_a_word));
    assert_eq!(refusal(load(&first)), mismatch(0));
    let last_word = payload.len() - 8;
    let last = patch_payload_for_tests(&bytes, last_word, &other_word(last_word));
    assert_eq!(refusal(load(&last)), mismatch(digits - 1));
    // A `b` word edited instead is another (wrong) key, not detectable here.
    let b_word = 50 + 4 + 4 * limbs;
    assert_eq!(
        load(&patch_payload_for_tests(
            &bytes,
            b_word,
            &other_word(b_word)
        )),
        Ok(())
    );
    // Another seed next to the stored halves.
    let seed = patch_payload_for_tests(&bytes, 9, &[payload[9] ^ 1]);
    assert_eq!(refusal(load(&seed)), mismatch(0));
    // In a compact key another seed is simply another key.
    let compact = relin.to_bytes_compressed().unwrap();
    let compact_payload = payload_for_tests(&compact);
    assert_eq!(
        load(&patch_payload_for_tests(
            &compact,
            9,
            &[compact_payload[9] ^ 1]
        )),
        Ok(())
    );

    // A key set of full keys: the last word is the last key's last digit.
    let mut set = KeySet::from_bytes(&w.context, &w.keys.to_bytes().unwrap()).unwrap();
    for key in set.keys_mut() {
        key.expand().unwrap();
    }
    let set_bytes = set.to_bytes().unwrap();
    let load_set = |bytes: &[u8]| KeySet::from_bytes(&w.context, bytes).map(|_| ());
    assert_eq!(load_set(&set_bytes), Ok(()));
    let set_payload = payload_for_tests(&set_bytes);
    let at = set_payload.len() - 8;
    let word = u64::from_le_bytes(set_payload[at..].try_into().unwrap());
    let edited = patch_payload_for_tests(
        &set_bytes,
        at,
        &word.checked_sub(1).unwrap_or(1).to_le_bytes(),
    );
    let last_digits = set.keys().last().unwrap().digits();
    assert_eq!(refusal(load_set(&edited)), mismatch(last_digits - 1));
}

/// Property-style, over random parameter descriptions (a test preset's
/// structure at a random degree, with a random name and slot count): each
/// saves and loads back to the same description and fingerprint; the
/// default security check refuses the insecure file with its typed error;
/// and a random cut or a random bit flip anywhere in the file is a typed
/// error, never a panic and never a load.
#[test]
fn random_parameter_files_round_trip_and_refuse_cuts_and_flips() {
    let seed = 0x5eed_9a7a;
    let mut rng = seeded_rng(seed);
    let mut below = |n: usize| (rng.next_u64() % n as u64) as usize;
    for case in 0..24 {
        let preset = Preset::TEST[below(Preset::TEST.len())];
        let log_n = 10 + below(4) as u32;
        let mut spec = preset.spec().with_log_n(log_n);
        spec.name = format!("random-{case}-{}", below(1 << 20));
        spec.log_slots = 1 + below(log_n as usize - 1) as u32;
        let params = Parameters::new(spec.clone(), SecurityCheck::AllowInsecure).unwrap();
        let bytes = params.to_bytes().unwrap();

        let loaded = Parameters::from_bytes(&bytes, SecurityCheck::AllowInsecure).unwrap();
        assert_eq!(loaded.spec(), &spec, "seed {seed}, case {case}");
        assert_eq!(loaded.fingerprint(), params.fingerprint());
        assert!(
            matches!(
                Parameters::from_bytes(&bytes, SecurityCheck::Enforce),
                Err(Error::Parameters(_))
            ),
            "seed {seed}, case {case}: an insecure file loaded under the default check"
        );

        let cut = below(bytes.len());
        assert!(
            matches!(
                Parameters::from_bytes(&bytes[..cut], SecurityCheck::AllowInsecure),
                Err(Error::Serialization(SerializationError::Truncated { .. }))
            ),
            "seed {seed}, case {case}: cut at {cut}"
        );
        for _ in 0..8 {
            let mut flipped = bytes.clone();
            let at = below(bytes.len());
            flipped[at] ^= 1 << below(8);
            let result = Parameters::from_bytes(&flipped, SecurityCheck::AllowInsecure);
            assert!(
                matches!(result, Err(Error::Serialization(_))),
                "seed {seed}, case {case}: a flip at byte {at} gave {result:?}"
            );
        }
    }
}
