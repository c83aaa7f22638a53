//! A seeded, bounded mutation fuzzer for loaders (behind `test-utils`).
//!
//! [`Harness::run`] takes valid objects (each with its loader and the
//! payload offsets of its length and count fields) and feeds every loader
//! mutants of them:
//! truncations, bit flips, inserted and deleted bytes, overwritten frame
//! lengths, overwritten length fields behind recomputed checksums, bytes
//! inserted into or deleted from the payload (framed anew, so that every
//! checksum holds and the parser itself must notice), and
//! objects of the wrong type (as they are, and relabelled with the loader's
//! kind behind recomputed checksums).
//!
//! **What counts as a failure.** A panic; a loader that allocates more than
//! [`Harness::context_bytes`] (the most a valid object of the context needs
//! at once) or four times the input, whichever is larger; and a mutant that
//! loads. Every mutant differs from its original (a mutant that happens to
//! equal it is skipped, not counted): raw mutations break a CRC-32 that
//! covers the header and every frame, so no accepted one is legitimate
//! (a CRC collision is possible for no truncation, insertion or deletion of
//! under 4 bytes and no burst of under 32 bits, and for the rest has odds of
//! 2^−32 per case). Mutations behind recomputed checksums only change a
//! length or count field, or an object's kind: the rest of the object then
//! no longer parses exactly (every count is checked against the context or
//! followed by the exact end-marker check), so these must be refused too.
//! Mutations that could make another valid object (a residue or a scale
//! edited behind recomputed checksums) are left to the field-by-field
//! tests.
//!
//! The seed comes from `HEMEM_FUZZ_SEED` (else a fixed one) and the case count
//! from `HEMEM_FUZZ_CASES`; both are printed, so a failure can be replayed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use rand_chacha::ChaCha20Rng;
use rand_core::Rng;

use crate::serialize::{
    Kind, Writer, patch_payload_for_tests, payload_for_tests, reseal_for_tests,
};

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the slot may be gone while the thread exits.
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

/// A global allocator that records, per thread, the largest single request
/// (install it in a test binary with `#[global_allocator]`).
#[derive(Debug)]
pub struct TrackingAllocator;

// SAFETY: every call is forwarded unchanged to `System`; the bookkeeping
// only touches a thread-local `Cell<usize>`, which never allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for TrackingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns its result with the largest single allocation it
/// asked for on this thread (meaningful under [`TrackingAllocator`]).
pub fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LARGEST.with(|l| l.replace(0));
    let out = f();
    let largest = LARGEST.with(|l| l.replace(before.max(l.get())));
    (out, largest)
}

/// A loader under test: `Ok(())` when it accepts the bytes.
pub type LoadFn<'a, E> = Box<dyn Fn(&[u8]) -> Result<(), E> + 'a>;

/// One valid object and its loader.
pub struct Target<'a, E> {
    /// A name for reports.
    pub name: &'static str,
    /// The object's kind (its header's kind byte).
    pub kind: Kind,
    /// The object's bytes; they must load.
    pub bytes: Vec<u8>,
    /// Payload offsets (frames skipped) of its u32 length and count fields.
    pub length_fields: Vec<usize>,
    /// Its loader.
    pub load: LoadFn<'a, E>,
}

impl<'a, E> Target<'a, E> {
    /// The target `name` for an object of `kind` (`n`: the ring degree its
    /// polynomials have), its length fields found by [`length_fields`].
    pub fn new(
        name: &'static str,
        kind: Kind,
        bytes: Vec<u8>,
        n: usize,
        load: impl Fn(&[u8]) -> Result<(), E> + 'a,
    ) -> Self {
        Self {
            name,
            kind,
            length_fields: length_fields(kind, &bytes, n),
            bytes,
            load: Box::new(load),
        }
    }
}

/// The small insecure parameters the fuzz harnesses use (N = 2^11, three
/// Q primes and one P prime): each case stays cheap and the loaders are the
/// same as for real presets.
///
/// # Panics
/// Never: the parameters are valid (a test helper).
#[allow(clippy::expect_used)]
pub fn small_parameters() -> crate::params::Parameters {
    let spec = crate::params::ParametersSpec {
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
    crate::params::Parameters::new(spec, crate::params::SecurityCheck::AllowInsecure)
        .expect("the fuzz parameters are valid")
}

impl<E> std::fmt::Debug for Target<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("bytes", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

/// How a mutant was made (for reports).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// The first `len` bytes.
    Truncate {
        /// Bytes kept.
        len: usize,
    },
    /// Byte `at` xor-ed with `mask`.
    FlipBits {
        /// Offset.
        at: usize,
        /// Nonzero mask.
        mask: u8,
    },
    /// `bytes` inserted before offset `at`.
    Insert {
        /// Offset.
        at: usize,
        /// Inserted bytes.
        bytes: Vec<u8>,
    },
    /// `len` bytes removed at offset `at`.
    Delete {
        /// Offset.
        at: usize,
        /// Bytes removed.
        len: usize,
    },
    /// The frame length field at stream offset `at` set to `value`
    /// (checksums left alone).
    FrameLength {
        /// Stream offset.
        at: usize,
        /// New length.
        value: u32,
    },
    /// The length field at payload offset `at` set to `value`, every
    /// checksum recomputed.
    LengthField {
        /// Payload offset.
        at: usize,
        /// New value.
        value: u32,
    },
    /// `bytes` inserted at payload offset `at`, the payload framed anew.
    PayloadInsert {
        /// Payload offset.
        at: usize,
        /// Inserted bytes.
        bytes: Vec<u8>,
    },
    /// `len` bytes removed at payload offset `at`, the payload framed anew.
    PayloadDelete {
        /// Payload offset.
        at: usize,
        /// Bytes removed.
        len: usize,
    },
    /// Another object's bytes, as they are.
    WrongType {
        /// The object fed.
        from: &'static str,
    },
    /// Another object's bytes with the kind byte set to the loader's and
    /// every checksum recomputed.
    Relabelled {
        /// The object fed.
        from: &'static str,
    },
}

/// A failing case.
#[derive(Debug)]
pub struct Failure {
    /// The case's index.
    pub case: u64,
    /// The loader.
    pub target: &'static str,
    /// The mutation.
    pub mutation: Mutation,
    /// What went wrong.
    pub what: String,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Report {
    /// Mutants fed to a loader.
    pub cases: u64,
    /// Mutants that equalled their original (skipped).
    pub identical: u64,
    /// Cases per mutation family, in the order of [`FAMILIES`].
    pub per_family: [u64; 10],
    /// Failures (at most 20 are kept).
    pub failures: Vec<Failure>,
    /// Failures in all.
    pub failure_count: u64,
}

/// The mutation families, as counted in [`Report::per_family`].
pub const FAMILIES: [&str; 10] = [
    "truncate",
    "flip",
    "insert",
    "delete",
    "frame length",
    "length field",
    "payload insert",
    "payload delete",
    "wrong type",
    "relabelled",
];

/// The object `bytes` with its payload replaced by `payload`, framed anew
/// (header kept, every checksum valid).
fn reframe_payload(bytes: &[u8], payload: &[u8]) -> Option<Vec<u8>> {
    let kind = *bytes.get(6)?;
    let kind = [
        Kind::Parameters,
        Kind::SecretKey,
        Kind::PublicKey,
        Kind::SwitchingKey,
        Kind::KeySet,
        Kind::Plaintext,
        Kind::Ciphertext,
        Kind::BootstrapKeys,
    ]
    .into_iter()
    .find(|k| *k as u8 == kind)?;
    let mut fp = [0u8; 8];
    fp.copy_from_slice(bytes.get(8..16)?);
    let mut out = Vec::with_capacity(bytes.len() + 64);
    let mut w = Writer::new(&mut out, kind, u64::from_le_bytes(fp)).ok()?;
    w.bytes(payload).ok()?;
    w.finish().ok()?;
    Some(out)
}

/// Interesting values for a u32 length field holding `v`.
fn length_value(rng: &mut ChaCha20Rng, v: u32) -> u32 {
    match rng.next_u32() % 12 {
        0 => 0,
        1 => 1,
        2 => v.wrapping_sub(1),
        3 => v.wrapping_add(1),
        4 => u32::MAX,
        5 => 1 << 31,
        6 => 1 << 24,
        7 => (1 << 24) + 1,
        8 => 1 << 20,
        9 => v.wrapping_mul(2),
        10 => v ^ (1 << (rng.next_u32() % 32)),
        _ => rng.next_u32(),
    }
}

fn below(rng: &mut ChaCha20Rng, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

/// Stream offsets of every frame length field (the end marker's included).
pub fn frame_starts(bytes: &[u8]) -> Vec<usize> {
    let mut at = 20;
    let mut starts = Vec::new();
    while let Some(len) = bytes.get(at..at + 4) {
        starts.push(at);
        let mut b = [0u8; 4];
        b.copy_from_slice(len);
        at += 8 + u32::from_le_bytes(b) as usize;
    }
    starts
}

fn read_u32(payload: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    if let Some(s) = payload.get(at..at + 4) {
        b.copy_from_slice(s);
    }
    u32::from_le_bytes(b)
}

/// The u32 at payload offset `at`, as a count.
fn count_at(payload: &[u8], at: usize) -> Option<usize> {
    let mut b = [0u8; 4];
    b.copy_from_slice(payload.get(at..at + 4)?);
    Some(u32::from_le_bytes(b) as usize)
}

/// A polynomial's length fields (its limb count and modulus indices) at
/// payload offset `at`, at degree `n`; returns the offset after it.
pub fn poly_length_fields(
    payload: &[u8],
    at: usize,
    n: usize,
    out: &mut Vec<usize>,
) -> Option<usize> {
    let count = count_at(payload, at)?;
    out.extend((0..=count).map(|i| at + 4 * i));
    Some(at + 4 + count * 4 + count * n * 8)
}

/// A switching key record's length fields (level, digit count, and its
/// polynomials') at payload offset `at`; returns the offset after it.
pub fn key_length_fields(
    payload: &[u8],
    at: usize,
    n: usize,
    out: &mut Vec<usize>,
) -> Option<usize> {
    out.extend([at + 41, at + 45]);
    let digits = count_at(payload, at + 45)?;
    let halves = if *payload.get(at + 49)? == 1 { 2 } else { 1 };
    let mut at = at + 50;
    for _ in 0..digits * halves {
        at = poly_length_fields(payload, at, n, out)?;
    }
    Some(at)
}

/// A key set record's length fields at payload offset `at`; returns the
/// offset after it.
pub fn key_set_length_fields(
    payload: &[u8],
    at: usize,
    n: usize,
    out: &mut Vec<usize>,
) -> Option<usize> {
    out.push(at);
    let mut next = at + 4;
    for _ in 0..count_at(payload, at)? {
        next = key_length_fields(payload, next, n, out)?;
    }
    Some(next)
}

/// The payload offsets of the u32 length and count fields of a valid object
/// of `kind` at degree `n` (fields that size what follows; a slot count or
/// a scale sizes nothing).
pub fn length_fields(kind: Kind, bytes: &[u8], n: usize) -> Vec<usize> {
    let p = payload_for_tests(bytes);
    let mut out = Vec::new();
    let _ = (|| -> Option<()> {
        match kind {
            Kind::Parameters => {
                let q = 4 + count_at(&p, 0)? + 8;
                let pk = q + 4 + 4 * count_at(&p, q)?;
                out.extend([0, q, pk]);
            }
            Kind::SecretKey => out.push(0),
            Kind::PublicKey => {
                let at = poly_length_fields(&p, 0, n, &mut out)?;
                poly_length_fields(&p, at, n, &mut out)?;
            }
            Kind::SwitchingKey => {
                key_length_fields(&p, 0, n, &mut out)?;
            }
            Kind::KeySet => {
                key_set_length_fields(&p, 0, n, &mut out)?;
            }
            Kind::Plaintext | Kind::Ciphertext => {
                // The level sizes the polynomials; the slot count (at 12)
                // sizes nothing, and another power of two is another valid
                // object.
                out.push(0);
                let at = poly_length_fields(&p, 16, n, &mut out)?;
                if kind == Kind::Ciphertext {
                    poly_length_fields(&p, at, n, &mut out)?;
                }
            }
            Kind::BootstrapKeys => {
                let sse = *p.first()? == 1;
                let mut at = key_set_length_fields(&p, 1, n, &mut out)?;
                if sse {
                    at = key_length_fields(&p, at, n, &mut out)?;
                    key_length_fields(&p, at, n, &mut out)?;
                }
            }
        }
        Some(())
    })();
    out
}

/// Makes one mutant of `targets[i]` (or, for the wrong-type families, of
/// another target) for `targets[i]`'s loader.
fn mutate<E>(
    rng: &mut ChaCha20Rng,
    targets: &[Target<'_, E>],
    i: usize,
) -> Option<(usize, Mutation, Vec<u8>)> {
    let t = targets.get(i)?;
    let bytes = &t.bytes;
    let family = below(rng, FAMILIES.len());
    let (mutation, out) = match family {
        0 => {
            let len = below(rng, bytes.len());
            (Mutation::Truncate { len }, bytes.get(..len)?.to_vec())
        }
        1 => {
            let at = below(rng, bytes.len());
            let mask = 1u8 << (rng.next_u32() % 8) | (rng.next_u32() as u8 & 0x11);
            let mut out = bytes.clone();
            *out.get_mut(at)? ^= mask;
            (Mutation::FlipBits { at, mask }, out)
        }
        2 => {
            let at = below(rng, bytes.len() + 1);
            let n = 1 + below(rng, 16);
            let ins: Vec<u8> = (0..n).map(|_| rng.next_u32() as u8).collect();
            let mut out = bytes.clone();
            out.splice(at..at, ins.iter().copied());
            (Mutation::Insert { at, bytes: ins }, out)
        }
        3 => {
            let at = below(rng, bytes.len());
            let len = (1 + below(rng, 16)).min(bytes.len() - at);
            let mut out = bytes.clone();
            out.drain(at..at + len);
            (Mutation::Delete { at, len }, out)
        }
        4 => {
            let starts = frame_starts(bytes);
            let at = *starts.get(below(rng, starts.len()))?;
            let value = length_value(rng, read_u32(bytes, at));
            let mut out = bytes.clone();
            out.get_mut(at..at + 4)?
                .copy_from_slice(&value.to_le_bytes());
            (Mutation::FrameLength { at, value }, out)
        }
        5 => {
            let at = *t.length_fields.get(below(rng, t.length_fields.len()))?;
            let payload = payload_for_tests(bytes);
            let value = length_value(rng, read_u32(&payload, at));
            let out = patch_payload_for_tests(bytes, at, &value.to_le_bytes());
            (Mutation::LengthField { at, value }, out)
        }
        6 => {
            let mut payload = payload_for_tests(bytes);
            let at = below(rng, payload.len() + 1);
            let n = 1 + below(rng, 16);
            let ins: Vec<u8> = (0..n).map(|_| rng.next_u32() as u8).collect();
            payload.splice(at..at, ins.iter().copied());
            let out = reframe_payload(bytes, &payload)?;
            (Mutation::PayloadInsert { at, bytes: ins }, out)
        }
        7 => {
            let mut payload = payload_for_tests(bytes);
            let at = below(rng, payload.len());
            let len = (1 + below(rng, 16)).min(payload.len().saturating_sub(at));
            payload.drain(at..at + len);
            let out = reframe_payload(bytes, &payload)?;
            (Mutation::PayloadDelete { at, len }, out)
        }
        _ => {
            // Another kind (two objects of one kind may both be valid).
            let others: Vec<&Target<'_, E>> = targets.iter().filter(|o| o.kind != t.kind).collect();
            let other = *others.get(below(rng, others.len()))?;
            if family == 8 {
                let from = other.name;
                (Mutation::WrongType { from }, other.bytes.clone())
            } else {
                let mut out = other.bytes.clone();
                *out.get_mut(6)? = t.kind as u8;
                let from = other.name;
                (Mutation::Relabelled { from }, reseal_for_tests(&out))
            }
        }
    };
    Some((family, mutation, out))
}

/// The harness: targets, and the allocation bound they justify.
pub struct Harness<'a, E> {
    /// The valid objects and their loaders.
    pub targets: Vec<Target<'a, E>>,
    /// The largest single allocation a loader may make whatever its input
    /// (measured on the valid objects by [`Harness::new`], doubled).
    pub context_bytes: usize,
}

impl<E> std::fmt::Debug for Harness<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("targets", &self.targets)
            .field("context_bytes", &self.context_bytes)
            .finish()
    }
}

impl<'a, E: std::fmt::Debug> Harness<'a, E> {
    /// Checks that every target loads, and measures the allocation bound.
    ///
    /// # Errors
    /// The name of a target that does not load, with its error.
    pub fn new(targets: Vec<Target<'a, E>>) -> Result<Self, String> {
        let mut largest = 0;
        for t in &targets {
            let (r, bytes) = largest_allocation(|| (t.load)(&t.bytes));
            r.map_err(|e| format!("{} does not load: {e:?}", t.name))?;
            largest = largest.max(bytes);
        }
        Ok(Self {
            targets,
            context_bytes: 2 * largest,
        })
    }

    /// Feeds `cases` mutants, round robin over the targets, from `seed`.
    pub fn run(&self, seed: u64, cases: u64) -> Report {
        let mut rng = crate::testing::seeded_rng(seed);
        let mut report = Report::default();
        let count = self.targets.len();
        if count == 0 {
            return report;
        }
        let mut case = 0u64;
        while report.cases < cases {
            let i = (case % count as u64) as usize;
            case += 1;
            let Some((family, mutation, input)) = mutate(&mut rng, &self.targets, i) else {
                continue;
            };
            let Some(t) = self.targets.get(i) else {
                continue;
            };
            if input == t.bytes {
                report.identical += 1;
                continue;
            }
            report.cases += 1;
            if let Some(slot) = report.per_family.get_mut(family) {
                *slot += 1;
            }
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                largest_allocation(|| (t.load)(&input).is_ok())
            }));
            let bound = self.context_bytes.max(4 * input.len());
            let what = match outcome {
                Err(_) => Some("panicked".to_string()),
                Ok((true, _)) => Some("accepted a mutant".to_string()),
                Ok((false, bytes)) if bytes > bound => Some(format!(
                    "allocated {bytes} bytes at once for {} input bytes (bound {bound})",
                    input.len()
                )),
                Ok(_) => None,
            };
            if let Some(what) = what {
                report.failure_count += 1;
                if report.failures.len() < 20 {
                    report.failures.push(Failure {
                        case: case - 1,
                        target: t.name,
                        mutation,
                        what,
                    });
                }
            }
        }
        report
    }
}

/// The seed and case count for a run: `HEMEM_FUZZ_SEED` (else
/// `default_seed`, so that CI runs are reproducible) and `HEMEM_FUZZ_CASES`
/// (else `default_cases`).
///
/// # Errors
/// A variable that is set but not a number.
pub fn seed_and_cases(default_seed: u64, default_cases: u64) -> Result<(u64, u64), String> {
    let var = |name: &str| -> Result<Option<u64>, String> {
        match std::env::var(name) {
            Ok(v) => v
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| format!("{name}={v:?} is not a number")),
            Err(_) => Ok(None),
        }
    };
    let seed = var("HEMEM_FUZZ_SEED")?.unwrap_or(default_seed);
    let cases = var("HEMEM_FUZZ_CASES")?.unwrap_or(default_cases);
    Ok((seed, cases))
}
