//! Seeded mutation fuzzing of bootstrap key files (with and without the
//! sparse-secret encapsulation keys), beside key sets, switching keys and
//! ciphertexts fed to the wrong loader: no panic, no mutant accepted, no
//! allocation beyond what the input or the context justifies. The rules
//! are in [`hemem_ckks::testing::fuzz`].
//!
//! Longer runs: `HEMEM_FUZZ_CASES=1000000 HEMEM_FUZZ_SEED=7 cargo test
//! --release -p hemem-bootstrap --test fuzz_key_file -- --nocapture`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::time::Instant;

use hemem_bootstrap::BootstrapKeys;
use hemem_ckks::prelude::*;
use hemem_ckks::serialize::{FromBytes, Kind, ToBytes, Writer};
use hemem_ckks::testing::fuzz::{
    FAMILIES, Harness, Target, TrackingAllocator, seed_and_cases, small_parameters,
};
use hemem_ckks::testing::{seed32, seeded_rng, unit_disk};

#[global_allocator]
static ALLOCATOR: TrackingAllocator = TrackingAllocator;

/// Cases per default run (CI).
const DEFAULT_CASES: u64 = 30_000;
const DEFAULT_SEED: u64 = 0x5eed_b007;

#[test]
fn mutated_bootstrap_key_files_are_refused() {
    let (seed, cases) = seed_and_cases(DEFAULT_SEED, DEFAULT_CASES).unwrap();
    println!("fuzz_key_file: seed {seed} (HEMEM_FUZZ_SEED), {cases} cases (HEMEM_FUZZ_CASES)");
    // Small insecure parameters and a small key file written in the
    // format `BootstrapKeys::save` uses (a real schedule's keys would make
    // each case hundreds of times dearer and test the same loader).
    let params = small_parameters();
    let context = Context::new(params, DeviceSelection::Cpu).unwrap();
    let n = context.params().degree().get();
    let keygen = KeyGenerator::with_seed(&context, seed32(seed));
    let secret = keygen.secret_key().unwrap();
    let sparse = keygen.secret_key_with_weight(16).unwrap();
    let public = keygen.public_key(&secret).unwrap();
    let keys = keygen
        .key_set(
            &secret,
            &KeySetRequest {
                relinearization: true,
                conjugation: true,
                rotations: vec![1, -2],
                ..Default::default()
            },
        )
        .unwrap();
    let to_sparse = keygen.switching_key(&secret, &sparse).unwrap();
    let to_dense = keygen.switching_key(&sparse, &secret).unwrap();
    let fingerprint = context.params().fingerprint();
    let file = |sse: bool| {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out, Kind::BootstrapKeys, fingerprint).unwrap();
        w.u8(u8::from(sse)).unwrap();
        w.key_set(&keys).unwrap();
        if sse {
            w.switching_key(&to_sparse).unwrap();
            w.switching_key(&to_dense).unwrap();
        }
        w.finish().unwrap();
        out
    };
    // The hand-written file is what `save` writes.
    let loaded = BootstrapKeys::load(&context, file(true).as_slice()).unwrap();
    let mut resaved = Vec::new();
    loaded.save(&mut resaved).unwrap();
    assert!(
        resaved == file(true),
        "the test file is not in save's format"
    );

    let values = unit_disk(&mut seeded_rng(seed), context.params().slots());
    let plaintext = Encoder::new(&context).encode(&values).unwrap();
    let ciphertext = Encryptor::with_seed(&context, seed32(seed + 1))
        .encrypt(&plaintext, &public)
        .unwrap();

    let c = &context;
    let targets = vec![
        Target::new(
            "bootstrap keys (SSE)",
            Kind::BootstrapKeys,
            file(true),
            n,
            |b| BootstrapKeys::load(c, b).map(drop),
        ),
        Target::new(
            "bootstrap keys (no SSE)",
            Kind::BootstrapKeys,
            file(false),
            n,
            |b| BootstrapKeys::load(c, b).map(drop),
        ),
        Target::new(
            "key set",
            Kind::KeySet,
            keys.to_bytes_compressed().unwrap(),
            n,
            move |b| KeySet::from_bytes(c, b).map(drop),
        ),
        Target::new(
            "switching key",
            Kind::SwitchingKey,
            to_sparse.to_bytes_compressed().unwrap(),
            n,
            move |b| SwitchingKey::from_bytes(c, b).map(drop),
        ),
        Target::new(
            "ciphertext",
            Kind::Ciphertext,
            ciphertext.to_bytes().unwrap(),
            n,
            move |b| Ciphertext::from_bytes(c, b).map(drop),
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
        "fuzz_key_file: {} cases ({} identical mutants skipped) in {:.1} s; allocation bound {} bytes",
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
