//! Seeded mutation fuzzing of every ckks loader (parameters, secret and
//! public keys, switching keys, key sets, plaintexts, ciphertexts): no
//! panic, no mutant accepted, no allocation beyond what the input or the
//! context justifies. The rules are in [`hemem_ckks::testing::fuzz`].
//!
//! Longer runs: `HEMEM_FUZZ_CASES=10000000 HEMEM_FUZZ_SEED=7 cargo test
//! --release -p hemem-ckks --test fuzz_loaders -- --nocapture`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::time::Instant;

use hemem_ckks::params::ParametersSpec;
use hemem_ckks::prelude::*;
use hemem_ckks::serialize::{FromBytes, Kind, ToBytes};
use hemem_ckks::testing::fuzz::{
    FAMILIES, Harness, Target, TrackingAllocator, length_fields, seed_and_cases,
};
use hemem_ckks::testing::seed32;
use hemem_ckks::{Error, testing::seeded_rng, testing::unit_disk};

#[global_allocator]
static ALLOCATOR: TrackingAllocator = TrackingAllocator;

/// Cases per default run (CI): see the timing printed by the test.
const DEFAULT_CASES: u64 = 150_000;
const DEFAULT_SEED: u64 = 0x5eed_f022;

fn target<'a>(
    name: &'static str,
    kind: Kind,
    bytes: Vec<u8>,
    n: usize,
    load: impl Fn(&[u8]) -> Result<(), Error> + 'a,
) -> Target<'a, Error> {
    Target {
        name,
        kind,
        length_fields: length_fields(kind, &bytes, n),
        bytes,
        load: Box::new(load),
    }
}

#[test]
fn mutated_objects_are_refused_without_panics_or_large_allocations() {
    let (seed, cases) = seed_and_cases(DEFAULT_SEED, DEFAULT_CASES).unwrap();
    println!("fuzz_loaders: seed {seed} (HEMEM_FUZZ_SEED), {cases} cases (HEMEM_FUZZ_CASES)");
    // Small insecure parameters keep each case cheap; the key set spans two
    // frames, so frame boundaries are crossed too.
    let spec = ParametersSpec {
        name: "fuzz".into(),
        log_n: 11,
        log_slots: 10,
        q_bits: vec![49, 36, 36],
        p_bits: vec![54],
        dnum: 3,
        enc_level: 2,
        post_bootstrap_level: None,
        user_primes: 3,
        hamming_weight: 64,
        insecure_test: true,
        bootstrap_rotation_keys: None,
    };
    let params = Parameters::new(spec, SecurityCheck::AllowInsecure).unwrap();
    let context = Context::new(params, DeviceSelection::Cpu).unwrap();
    let n = context.params().degree().get();
    let keygen = KeyGenerator::with_seed(&context, seed32(seed));
    let secret = keygen.secret_key().unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let keys = keygen
        .key_set(
            &secret,
            &KeySetRequest {
                relinearization: true,
                conjugation: true,
                rotations: vec![1, 2, -3, 5],
                ..Default::default()
            },
        )
        .unwrap();
    let values = unit_disk(&mut seeded_rng(seed), context.params().slots());
    let plaintext = Encoder::new(&context).encode(&values).unwrap();
    let ciphertext = Encryptor::with_seed(&context, seed32(seed + 1))
        .encrypt(&plaintext, &public)
        .unwrap();
    let relin = keys.relinearization_key().unwrap();
    let mut full =
        SwitchingKey::from_bytes(&context, &relin.to_bytes_compressed().unwrap()).unwrap();
    full.expand().unwrap();

    let c = &context;
    let targets = vec![
        target(
            "parameters",
            Kind::Parameters,
            c.params().to_bytes(),
            n,
            |b| Parameters::from_bytes(b, SecurityCheck::AllowInsecure).map(drop),
        ),
        target(
            "secret key",
            Kind::SecretKey,
            secret.to_bytes().to_vec(),
            n,
            |b| SecretKey::from_bytes(c, b).map(drop),
        ),
        target(
            "public key",
            Kind::PublicKey,
            public.to_bytes().unwrap(),
            n,
            |b| PublicKey::from_bytes(c, b).map(drop),
        ),
        target(
            "switching key (compact)",
            Kind::SwitchingKey,
            relin.to_bytes_compressed().unwrap(),
            n,
            |b| SwitchingKey::from_bytes(c, b).map(drop),
        ),
        target(
            "switching key (full)",
            Kind::SwitchingKey,
            full.to_bytes().unwrap(),
            n,
            |b| SwitchingKey::from_bytes(c, b).map(drop),
        ),
        target(
            "key set",
            Kind::KeySet,
            keys.to_bytes_compressed(c).unwrap(),
            n,
            |b| KeySet::from_bytes(c, b).map(drop),
        ),
        target(
            "plaintext",
            Kind::Plaintext,
            plaintext.to_bytes().unwrap(),
            n,
            |b| Plaintext::from_bytes(c, b).map(drop),
        ),
        target(
            "ciphertext",
            Kind::Ciphertext,
            ciphertext.to_bytes().unwrap(),
            n,
            |b| Ciphertext::from_bytes(c, b).map(drop),
        ),
    ];
    for t in &targets {
        println!(
            "  {}: {} bytes, {} length fields",
            t.name,
            t.bytes.len(),
            t.length_fields.len()
        );
    }
    let harness = Harness::new(targets).unwrap();
    let start = Instant::now();
    let report = harness.run(seed, cases);
    println!(
        "fuzz_loaders: {} cases ({} identical mutants skipped) in {:.1} s; allocation bound {} bytes",
        report.cases,
        report.identical,
        start.elapsed().as_secs_f64(),
        harness.context_bytes
    );
    for (family, count) in FAMILIES.iter().zip(report.per_family) {
        println!("  {family}: {count}");
    }
    assert!(
        report.failures.is_empty(),
        "seed {seed}: {} failures, first ones: {:#?}",
        report.failure_count,
        report.failures
    );
}
