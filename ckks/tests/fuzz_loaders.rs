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

use hemem_ckks::prelude::*;
use hemem_ckks::serialize::{FromBytes, Kind, ToBytes};
use hemem_ckks::testing::fuzz::{
    FAMILIES, Harness, Target, TrackingAllocator, seed_and_cases, small_parameters,
};
use hemem_ckks::testing::seed32;
use hemem_ckks::{testing::seeded_rng, testing::unit_disk};

#[global_allocator]
static ALLOCATOR: TrackingAllocator = TrackingAllocator;

/// Cases per default run (CI): see the timing printed by the test.
const DEFAULT_CASES: u64 = 150_000;
const DEFAULT_SEED: u64 = 0x5eed_f022;

#[test]
fn mutated_objects_are_refused_without_panics_or_large_allocations() {
    let (seed, cases) = seed_and_cases(DEFAULT_SEED, DEFAULT_CASES).unwrap();
    println!("fuzz_loaders: seed {seed} (HEMEM_FUZZ_SEED), {cases} cases (HEMEM_FUZZ_CASES)");
    // Small insecure parameters keep each case cheap; the key set spans two
    // frames, so frame boundaries are crossed too.
    let params = small_parameters();
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
        Target::new(
            "parameters",
            Kind::Parameters,
            c.params().to_bytes().unwrap(),
            n,
            |b| Parameters::from_bytes(b, SecurityCheck::AllowInsecure).map(drop),
        ),
        Target::new(
            "secret key",
            Kind::SecretKey,
            secret.to_bytes().unwrap().to_vec(),
            n,
            |b| SecretKey::from_bytes(c, b).map(drop),
        ),
        Target::new(
            "public key",
            Kind::PublicKey,
            public.to_bytes().unwrap(),
            n,
            |b| PublicKey::from_bytes(c, b).map(drop),
        ),
        Target::new(
            "switching key (compact)",
            Kind::SwitchingKey,
            relin.to_bytes_compressed().unwrap(),
            n,
            |b| SwitchingKey::from_bytes(c, b).map(drop),
        ),
        Target::new(
            "switching key (full)",
            Kind::SwitchingKey,
            full.to_bytes().unwrap(),
            n,
            |b| SwitchingKey::from_bytes(c, b).map(drop),
        ),
        Target::new(
            "key set",
            Kind::KeySet,
            keys.to_bytes_compressed().unwrap(),
            n,
            |b| KeySet::from_bytes(c, b).map(drop),
        ),
        Target::new(
            "plaintext",
            Kind::Plaintext,
            plaintext.to_bytes().unwrap(),
            n,
            |b| Plaintext::from_bytes(c, b).map(drop),
        ),
        Target::new(
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
