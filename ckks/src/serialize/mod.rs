//! A versioned binary format for parameters, keys, plaintexts and
//! ciphertexts.
//!
//! Every object is a 32-byte header followed by a payload:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `HEMM` |
//! | 4..6 | format version (little endian), currently 1 |
//! | 6 | object kind |
//! | 7 | flags (bit 0: compressed switching keys) |
//! | 8..16 | fingerprint of the parameters ([`crate::params::Parameters::fingerprint`]) |
//! | 16..24 | payload length |
//! | 24..32 | checksum of the payload |
//!
//! All integers are little endian. Loading checks the magic, version, kind,
//! fingerprint, length and checksum before parsing, and every field after:
//! levels, moduli, residues below their prime, ternary secret coefficients,
//! scales and slot counts. Bad data is a [`crate::SerializationError`], never
//! a panic or an out-of-bounds read; allocations are bounded by the bytes
//! actually present.
//!
//! Switching keys may be written compressed: their uniform halves are
//! replaced by the 32-byte seed they are regenerated from.

mod format;
mod objects;

pub use format::{FORMAT_VERSION, Kind, MAGIC};

use crate::Result;
use crate::context::Context;

/// Objects that serialize to bytes.
pub trait ToBytes {
    /// The object in hemem's binary format.
    ///
    /// # Errors
    /// Transfer errors when the object lives on a device.
    fn to_bytes(&self) -> Result<Vec<u8>>;
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

/// Recomputes the header checksum of `bytes` after its payload was altered:
/// lets tests reach the field checks behind the checksum.
#[cfg(any(test, feature = "test-utils"))]
pub fn reseal_for_tests(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if let (Some(payload), Some(slot)) = (bytes.get(32..), out.get_mut(24..32)) {
        slot.copy_from_slice(&format::checksum(payload).to_le_bytes());
    }
    out
}
