//! Memory derived from the secret key is sensitive: key generation's,
//! secret-key encryption's and decryption's temporaries are allocated
//! sensitive (counted by the allocator's statistics), and none of their
//! words reaches a later allocation of the same size — on the CPU, whose
//! allocator caches freed blocks by size, and on the GPU, whose pool hands
//! freed blocks out again.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use hemem_ckks::ntt::GaloisElement;
use hemem_ckks::prelude::*;
use hemem_ckks::testing::{seed32, seeded_rng, unit_disk};
use hemem_memory::testing::gpu_or_skip;
use hemem_memory::{Allocator, Buffer, MemoryClass};

const SEED: u64 = 0x0014_5ec2;

fn context(device: DeviceSelection) -> Context {
    let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)
        .expect("parameters");
    Context::new(params, device).expect("context")
}

fn allocator(context: &Context) -> &Allocator {
    context.backend().allocator()
}

/// Sensitive allocations of `class` so far.
fn sensitive(context: &Context, class: MemoryClass) -> u64 {
    allocator(context)
        .statistics()
        .class(class)
        .sensitive_allocations
}

/// Checks that every sensitive allocation of `class` has been freed.
fn all_freed(context: &Context, class: MemoryClass) {
    let s = allocator(context).statistics().class(class);
    assert_eq!(
        s.sensitive_allocations, s.sensitive_frees,
        "{class}: a sensitive buffer outlived its operation"
    );
}

#[test]
fn keygen_encryption_and_decryption_temporaries_are_allocated_sensitive() {
    println!("seed {SEED:#x}");
    let ctx = context(DeviceSelection::Cpu);
    let params = ctx.params().clone();
    let digits = params.digits_at(params.max_level()) as u64;
    let keygen = KeyGenerator::with_seed(&ctx, seed32(SEED));
    let t = MemoryClass::Temporary;

    let before = sensitive(&ctx, MemoryClass::EvaluationKey);
    let secret = keygen.secret_key().unwrap();
    assert!(secret.poly().is_sensitive());
    assert_eq!(sensitive(&ctx, MemoryClass::EvaluationKey), before + 1);

    // a·s of the public key.
    let before = sensitive(&ctx, t);
    let public = keygen.public_key(&secret).unwrap();
    assert_eq!(sensitive(&ctx, t), before + 1, "public key: a·s");
    all_freed(&ctx, t);

    // s², then a_j·s and the gadget multiple of s² for every digit.
    let before = sensitive(&ctx, t);
    let relin = keygen.relinearization_key(&secret).unwrap();
    assert_eq!(
        sensitive(&ctx, t),
        before + 1 + 2 * digits,
        "relinearisation key: s², a_j·s, P·s²"
    );
    all_freed(&ctx, t);

    // σ_g(s), then the same per digit.
    let before = sensitive(&ctx, t);
    let rotation = keygen.rotation_key(&secret, 3).unwrap();
    assert_eq!(
        sensitive(&ctx, t),
        before + 1 + 2 * digits,
        "rotation key: σ_g(s), a_j·s, P·σ_g(s)"
    );
    all_freed(&ctx, t);
    drop((relin, rotation));

    // Secret-key encryption: a·s.
    let encoder = Encoder::new(&ctx);
    let values = unit_disk(&mut seeded_rng(SEED), params.slots());
    let pt = encoder.encode(&values).unwrap();
    let encryptor = Encryptor::with_seed(&ctx, seed32(SEED + 1));
    let before = sensitive(&ctx, t);
    let symmetric = encryptor.encrypt_symmetric(&pt, &secret).unwrap();
    assert_eq!(sensitive(&ctx, t), before + 1, "secret-key encryption: a·s");
    all_freed(&ctx, t);
    let (c0, c1) = symmetric.parts();
    assert!(
        !c0.is_sensitive() && !c1.is_sensitive(),
        "a ciphertext is public"
    );

    // Decryption: c0 + c1·s, and decoding's copy of it.
    let ct = encryptor.encrypt(&pt, &public).unwrap();
    let decryptor = Decryptor::new(&ctx);
    let (before_p, before_t) = (sensitive(&ctx, MemoryClass::Plaintext), sensitive(&ctx, t));
    let decrypted = decryptor.decrypt(&ct, &secret).unwrap();
    assert!(decrypted.poly().unwrap().is_sensitive());
    assert_eq!(sensitive(&ctx, MemoryClass::Plaintext), before_p + 1);
    encoder.decode(&decrypted).unwrap();
    assert_eq!(
        sensitive(&ctx, t),
        before_t + 1,
        "decoding's coefficient copy"
    );
    all_freed(&ctx, t);
    drop(decrypted);
    all_freed(&ctx, MemoryClass::Plaintext);

    secret.release().unwrap();
    all_freed(&ctx, MemoryClass::EvaluationKey);
    assert_eq!(allocator(&ctx).check(), Ok(()));
}

/// The words of a buffer, wherever it lives.
fn words_of(allocator: &Allocator, buffer: &Buffer) -> Vec<u64> {
    let mut out = vec![0u64; buffer.words()];
    allocator.download(buffer, 0, &mut out).unwrap();
    out
}

/// Whether any N-word limb of `words` equals any limb of `secret`: a
/// secret-derived limb left in memory that a later allocation got.
fn holds_secret_limb(words: &[u64], secret: &[u64], n: usize) -> bool {
    words
        .chunks_exact(n)
        .any(|limb| secret.chunks_exact(n).any(|s| s == limb))
}

/// Allocates `count` buffers of `class` and `bytes` (holding them all, so
/// each is a different block) and checks that none holds a limb of any of
/// `secrets`.
fn later_allocations_hold_no_secret(
    context: &Context,
    class: MemoryClass,
    bytes: usize,
    secrets: &[(&str, &[u64])],
) {
    let n = context.params().degree().get();
    let a = allocator(context);
    let later: Vec<Buffer> = (0..8).map(|_| a.allocate(class, bytes).unwrap()).collect();
    for b in &later {
        let words = words_of(a, b);
        for (what, secret) in secrets {
            assert!(
                !holds_secret_limb(&words, secret, n),
                "a later {class} allocation holds a limb of {what}"
            );
        }
    }
}

/// Key generation and decryption, then allocations of the sizes their
/// secret temporaries had: none holds a secret-derived limb.
fn secret_words_never_reach_a_later_allocation(ctx: &Context) {
    println!("seed {SEED:#x}");
    let params = ctx.params().clone();
    let n = params.degree().get();
    let keygen = KeyGenerator::with_seed(ctx, seed32(SEED + 2));
    let secret = keygen.secret_key().unwrap();
    if let Some(device) = allocator(ctx).device() {
        // The key's coefficients went up through the pinned staging ring
        // (limb after limb from the start of a slot): none of its limbs
        // stays there.
        let staging = hemem_memory::testing::staging_words(device)
            .unwrap()
            .expect("the secret's upload made the ring");
        let table = params.all_moduli();
        let limbs: Vec<u64> = table
            .iter()
            .take(2)
            .flat_map(|q| {
                secret
                    .coefficients()
                    .iter()
                    .map(move |&c| if c < 0 { q.value() - 1 } else { c as u64 })
            })
            .collect();
        assert!(
            !holds_secret_limb(&staging, &limbs, n),
            "the secret's coefficients stayed in pinned staging"
        );
    }
    let public = keygen.public_key(&secret).unwrap();

    // What s² and σ_g(s) are, computed (and freed) before the keys.
    let square = secret
        .poly()
        .mul(secret.poly(), MemoryClass::Temporary)
        .unwrap();
    let s2 = zeroize::Zeroizing::new(square.to_words().unwrap());
    drop(square);
    let g = GaloisElement::rotation(5, n);
    let rotated = secret
        .poly()
        .automorphism(g, MemoryClass::Temporary)
        .unwrap();
    let sigma = zeroize::Zeroizing::new(rotated.to_words().unwrap());
    drop(rotated);
    let s = zeroize::Zeroizing::new(secret.poly().to_words().unwrap());
    let relin = keygen.relinearization_key(&secret).unwrap();
    let rotation = keygen.rotation_key(&secret, 5).unwrap();
    let bytes = secret.poly().buffer().bytes();
    later_allocations_hold_no_secret(
        ctx,
        MemoryClass::Temporary,
        bytes,
        &[("s²", &s2), ("σ_g(s)", &sigma), ("s", &s)],
    );

    // Decryption: c0 + c1·s in a plaintext, its coefficient form in
    // decoding.
    let encoder = Encoder::new(ctx);
    let values = unit_disk(&mut seeded_rng(SEED + 3), params.slots());
    let pt = encoder.encode(&values).unwrap();
    let ct = Encryptor::with_seed(ctx, seed32(SEED + 4))
        .encrypt(&pt, &public)
        .unwrap();
    let decrypted = Decryptor::new(ctx).decrypt(&ct, &secret).unwrap();
    let m = zeroize::Zeroizing::new(decrypted.poly().unwrap().to_words().unwrap());
    let coefficients = decrypted
        .poly()
        .unwrap()
        .to_coeff(MemoryClass::Temporary)
        .unwrap();
    let m_coeff = zeroize::Zeroizing::new(coefficients.to_words().unwrap());
    drop(coefficients);
    encoder.decode(&decrypted).unwrap();
    let bytes = decrypted.poly().unwrap().buffer().bytes();
    drop(decrypted);
    for class in [MemoryClass::Plaintext, MemoryClass::Temporary] {
        later_allocations_hold_no_secret(
            ctx,
            class,
            bytes,
            &[("c0 + c1·s", &m), ("its coefficients", &m_coeff)],
        );
    }
    drop((relin, rotation));
    secret.release().unwrap();
    assert_eq!(allocator(ctx).check(), Ok(()));
}

#[test]
fn secret_derived_words_never_reach_a_later_host_allocation() {
    secret_words_never_reach_a_later_allocation(&context(DeviceSelection::Cpu));
}

#[test]
fn gpu_secret_derived_words_never_reach_a_later_pool_allocation() {
    let name = "gpu_secret_derived_words_never_reach_a_later_pool_allocation";
    let Some(device) = gpu_or_skip(name) else {
        return;
    };
    drop(device);
    secret_words_never_reach_a_later_allocation(&context(DeviceSelection::Gpu(0)));
}
