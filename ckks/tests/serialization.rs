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

use hemem_ckks::prelude::*;
use hemem_ckks::serialize::{FromBytes, ToBytes};
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
    let p2 = Parameters::from_bytes(&params.to_bytes(), SecurityCheck::AllowInsecure).unwrap();
    assert_eq!(&p2, params);
    assert!(matches!(
        Parameters::from_bytes(&params.to_bytes(), SecurityCheck::Enforce),
        Err(Error::Parameters(
            hemem_ckks::ParametersError::Insecure { .. }
        ))
    ));
    let real = Parameters::from_preset(Preset::FTb).unwrap();
    assert_eq!(
        Parameters::from_bytes(&real.to_bytes(), SecurityCheck::Enforce).unwrap(),
        real
    );

    let sk = SecretKey::from_bytes(&w.context, &w.secret.to_bytes()).unwrap();
    assert_eq!(sk.coefficients(), w.secret.coefficients());
    assert_eq!(words(sk.poly()), words(w.secret.poly()));

    let pk = PublicKey::from_bytes(&w.context, &w.public.to_bytes().unwrap()).unwrap();
    assert_eq!(words(pk.parts().0), words(w.public.parts().0));
    assert_eq!(words(pk.parts().1), words(w.public.parts().1));

    let pt = Plaintext::from_bytes(&w.context, &w.plaintext.to_bytes().unwrap()).unwrap();
    assert_eq!(words(pt.poly()), words(w.plaintext.poly()));
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
    let compressed = w.keys.to_bytes(&w.context).unwrap();
    let mut expanded = KeySet::from_bytes(&w.context, &compressed).unwrap();
    for key in expanded.keys_mut() {
        key.expand().unwrap();
    }
    let full = expanded.to_bytes(&w.context).unwrap();
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
        w.context.params().to_bytes(),
        w.secret.to_bytes().to_vec(),
        w.public.to_bytes().unwrap(),
        w.keys
            .relinearization_key()
            .unwrap()
            .to_bytes_compressed()
            .unwrap(),
        w.keys.to_bytes_compressed(&w.context).unwrap(),
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
    let mut v2 = ct.clone();
    v2[4] = 3;
    assert!(matches!(
        Ciphertext::from_bytes(&w.context, &v2),
        Err(Error::Serialization(
            SerializationError::UnsupportedVersion { version: 3, .. }
        ))
    ));
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
    // Level beyond the chain: patch the first payload field and fix the checksum.
    let mut bad = ct.clone();
    bad[32..36].copy_from_slice(&99u32.to_le_bytes());
    let fixed = hemem_ckks::serialize::reseal_for_tests(&bad);
    assert!(matches!(
        Ciphertext::from_bytes(&w.context, &fixed),
        Err(Error::Serialization(SerializationError::InvalidField {
            field: "level"
        }))
    ));
    // A residue at or above its prime.
    let mut bad = ct.clone();
    let first_word = 32 + 4 + 8 + 4 + 4 + 4 * (w.ciphertext.level().get() + 1);
    bad[first_word..first_word + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let fixed = hemem_ckks::serialize::reseal_for_tests(&bad);
    assert!(matches!(
        Ciphertext::from_bytes(&w.context, &fixed),
        Err(Error::Serialization(SerializationError::InvalidField {
            field: "residue"
        }))
    ));
    // A secret coefficient that is not ternary.
    let mut sk = w.secret.to_bytes().to_vec();
    sk[40] = 7;
    let fixed = hemem_ckks::serialize::reseal_for_tests(&sk);
    assert!(matches!(
        SecretKey::from_bytes(&w.context, &fixed),
        Err(Error::Serialization(SerializationError::InvalidField {
            field: "secret coefficient"
        }))
    ));
    // Non-power-of-two slots.
    let mut bad = ct.clone();
    bad[44..48].copy_from_slice(&3u32.to_le_bytes());
    let fixed = hemem_ckks::serialize::reseal_for_tests(&bad);
    assert!(matches!(
        Ciphertext::from_bytes(&w.context, &fixed),
        Err(Error::Serialization(SerializationError::InvalidField {
            field: "slots"
        }))
    ));
}
