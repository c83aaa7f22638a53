//! A versioned binary format for parameters, keys, plaintexts and
//! ciphertexts, written to any [`std::io::Write`] and read from any
//! [`std::io::Read`] one polynomial at a time.
//!
//! An object is a 20-byte header, its payload cut into checksummed frames,
//! and an end marker:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `HEMM` |
//! | 4..6 | format version (little endian), currently 4 |
//! | 6 | object kind ([`Kind`]) |
//! | 7 | flags: none is defined yet, so a reader refuses any nonzero value ([`crate::SerializationError::UnknownFlags`]) |
//! | 8..16 | fingerprint of the parameters ([`crate::params::Parameters::fingerprint`]: every field of their description and every prime) |
//! | 16..20 | CRC-32 of bytes 0..16 |
//! | then, per frame | payload length `len` (u32, 1 ..= 16 MiB; the writer uses 1 MiB), `len` payload bytes, CRC-32 of every byte of the stream before this field |
//! | end | length 0, then the CRC-32 of every byte before it |
//!
//! All integers are little endian. A reader checks each frame's CRC before
//! handing out any of its bytes, so every field it parses has been verified;
//! the running CRC (`crc32fast`) also covers the header, the frame lengths
//! and the frames' order (the header CRC covers bytes 0..16, flags
//! included). Loading checks the magic, version, kind, flags and
//! fingerprint, and every field after against the context: counts, levels,
//! modulus indices, residues below their prime; a secret key ternary with
//! exactly the parameters' Hamming weight; each switching key's Galois
//! element against its kind (0 for relinearisation, conjugation and generic
//! keys; for a rotation an odd element in `(1, 2N − 1)`, never the
//! conjugation element); a full switching key's uniform halves equal to
//! those its seed gives (regenerated and compared); no key twice in a key set; scales in `[1, Q_l)` at
//! the object's level `l`; slot counts; then the end marker and that
//! nothing follows it. Bad data is a [`crate::SerializationError`], never a
//! panic or an out-of-bounds read; nothing larger than one frame (and, for
//! a device, a few limbs of staging) is buffered beyond the object itself,
//! and a frame's buffer grows only as its bytes arrive (one writer frame at
//! once, then at most doubling), so a forged length allocates nothing the
//! input does not hold. `ckks/tests/fuzz_loaders.rs` fuzzes every loader.
//! The CRC detects accidental corruption and truncation; it does not
//! authenticate.
//!
//! A polynomial is its limb count (u32), its global modulus indices (u32
//! each) and its residues (u64 each), limb after limb. A switching key is
//! its kind (u8: relinearisation 0, rotation 1, conjugation 2, generic 3),
//! Galois element (u64, 0 but for rotations), 32-byte seed, level (u32),
//! digit count (u32), whether the uniform halves follow (u8), then its `b`
//! polynomials (over `q_0..q_level` and the special primes) and, if kept,
//! its `a` ones. A key or key set is saved as held (compact, `b` and the
//! seed, unless it was expanded); `to_bytes_compressed` and hemem-bootstrap's
//! key files always write the compact form.
//!
//! # One API for every object
//!
//! | | write | read |
//! |---|---|---|
//! | to a [`Write`] / from a [`Read`] | [`Save::save`]`(w)` | [`Load::load`]`(context, r)` |
//! | a file | [`Save::save_to_path`]`(path)` | [`Load::load_from_path`]`(context, path)` |
//! | bytes | [`ToBytes::to_bytes`]`()` | [`FromBytes::from_bytes`]`(context, bytes)` |
//!
//! Every object a program saves implements [`Save`] and [`Load`] (and so
//! [`ToBytes`] and [`FromBytes`]): [`PublicKey`](crate::keys::PublicKey),
//! [`SwitchingKey`](crate::keys::SwitchingKey), [`KeySet`](crate::keys::KeySet),
//! [`Plaintext`](crate::encoding::Plaintext),
//! [`Ciphertext`](crate::eval::Ciphertext), and hemem-bootstrap's
//! `BootstrapKeys`. Objects carry their parameters, so saving never takes a
//! context; loading takes the context the object goes into (and whose
//! parameters it must have). Two types differ, on purpose:
//! - [`Parameters`](crate::params::Parameters) implement [`Save`], but they
//!   make the context rather than load into one: they read with
//!   `Parameters::load(r, check)`, `load_from_path(path, check)` and
//!   `from_bytes(bytes, check)`, the security decision taking the
//!   context's place.
//! - [`SecretKey`](crate::keys::SecretKey) implements [`Load`] but not
//!   [`Save`]: its own `save`, `save_to_path` (owner-only file mode) and
//!   `to_bytes` (zeroized on drop) keep the same names and shapes.
//!
//! An empty [`KeySet`](crate::keys::KeySet) has no parameters to write and
//! is refused by [`Save`] (see its implementation); loading accepts one.

mod files;
mod format;
mod objects;

use std::io::{Read, Write};
use std::path::Path;

pub use files::{FileMode, open_file, write_file};
pub use format::{FORMAT_VERSION, Header, Kind, MAGIC, Reader, Writer};
pub use objects::keys_fingerprint;

use crate::Result;
use crate::context::Context;

/// Objects that write themselves to a [`Write`], one polynomial at a time.
pub trait Save {
    /// Writes the object in hemem's binary format.
    ///
    /// # Errors
    /// Transfer errors when the object lives on a device;
    /// [`crate::SerializationError::Io`].
    fn save<W: Write>(&self, w: W) -> Result<()>;

    /// Writes the object to a file, through a temporary file renamed into
    /// place.
    ///
    /// # Errors
    /// As [`Save::save`].
    fn save_to_path(&self, path: impl AsRef<Path>) -> Result<()> {
        write_file(path.as_ref(), FileMode::Shared, |f| self.save(f))
    }
}

/// Objects that load from a [`Read`] into a context (on the context's
/// device), one polynomial at a time straight into its destination.
pub trait Load: Sized {
    /// Loads the object, checking everything.
    ///
    /// # Errors
    /// A [`crate::SerializationError`] for malformed, truncated or
    /// corrupted data, or data of other parameters; allocation errors.
    fn load<R: Read>(context: &Context, r: R) -> Result<Self>;

    /// Loads the object from a file.
    ///
    /// # Errors
    /// As [`Load::load`].
    fn load_from_path(context: &Context, path: impl AsRef<Path>) -> Result<Self> {
        Self::load(context, open_file(path.as_ref())?)
    }
}

/// Objects that serialize to bytes.
pub trait ToBytes {
    /// The object in hemem's binary format.
    ///
    /// # Errors
    /// Transfer errors when the object lives on a device.
    fn to_bytes(&self) -> Result<Vec<u8>>;
}

impl<T: Save> ToBytes for T {
    fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.save(&mut out)?;
        Ok(out)
    }
}

/// Objects that load from bytes into a context (on the context's device).
pub trait FromBytes: Sized {
    /// Loads the object, checking everything.
    ///
    /// # Errors
    /// A [`crate::SerializationError`] for malformed data or data of other
    /// parameters; allocation errors.
    fn from_bytes(context: &Context, bytes: &[u8]) -> Result<Self>;
}

impl<T: Load> FromBytes for T {
    fn from_bytes(context: &Context, bytes: &[u8]) -> Result<Self> {
        Self::load(context, bytes)
    }
}

/// Recomputes every checksum of `bytes` (a whole object) after it was
/// altered: lets tests reach the field checks behind the checksums.
#[cfg(any(test, feature = "test-utils"))]
pub fn reseal_for_tests(bytes: &[u8]) -> Vec<u8> {
    format::reframe(bytes, |_, _| {})
}

/// Overwrites payload bytes `at..at + with.len()` (payload offsets, frames
/// skipped) of the object `bytes` and recomputes every checksum.
#[cfg(any(test, feature = "test-utils"))]
pub fn patch_payload_for_tests(bytes: &[u8], at: usize, with: &[u8]) -> Vec<u8> {
    format::reframe(bytes, |frame, start| {
        for (i, &b) in with.iter().enumerate() {
            if let Some(slot) = (at + i)
                .checked_sub(start)
                .and_then(|offset| frame.get_mut(offset))
            {
                *slot = b;
            }
        }
    })
}

/// The payload of the object `bytes` (frames joined): lets tests find
/// fields.
#[cfg(any(test, feature = "test-utils"))]
pub fn payload_for_tests(bytes: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    format::reframe(bytes, |frame, _| payload.extend_from_slice(frame));
    payload
}
