//! The header, the checksum, and bounds-checked readers and writers.

use crate::{Result, SerializationError};

/// The magic number every object starts with.
pub const MAGIC: [u8; 4] = *b"HEMM";

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 2;

const HEADER_BYTES: usize = 32;

/// What a serialized object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// [`crate::params::Parameters`].
    Parameters = 1,
    /// [`crate::keys::SecretKey`].
    SecretKey = 2,
    /// [`crate::keys::PublicKey`].
    PublicKey = 3,
    /// [`crate::keys::SwitchingKey`].
    SwitchingKey = 4,
    /// [`crate::keys::KeySet`].
    KeySet = 5,
    /// [`crate::encoding::Plaintext`].
    Plaintext = 6,
    /// [`crate::eval::Ciphertext`].
    Ciphertext = 7,
}

impl Kind {
    /// A name for errors.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Parameters => "parameters",
            Self::SecretKey => "secret key",
            Self::PublicKey => "public key",
            Self::SwitchingKey => "switching key",
            Self::KeySet => "key set",
            Self::Plaintext => "plaintext",
            Self::Ciphertext => "ciphertext",
        }
    }

    fn from_u8(v: u8) -> Option<Self> {
        [
            Self::Parameters,
            Self::SecretKey,
            Self::PublicKey,
            Self::SwitchingKey,
            Self::KeySet,
            Self::Plaintext,
            Self::Ciphertext,
        ]
        .into_iter()
        .find(|k| *k as u8 == v)
    }
}

/// A 64-bit checksum over 8-byte words (not cryptographic: it detects
/// accidental corruption and truncation; authenticity needs a MAC).
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15 ^ bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(word))
            .wrapping_mul(0x0000_0100_0000_01b3)
            .rotate_left(29);
    }
    for &b in chunks.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^ (h >> 31)
}

/// Writes an object: payload first into a buffer, then the header.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    payload: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.payload.push(v);
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.payload.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.payload.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }

    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.payload.extend_from_slice(v);
    }

    pub(crate) fn words(&mut self, v: &[u64]) {
        self.payload.reserve(v.len() * 8);
        for w in v {
            self.payload.extend_from_slice(&w.to_le_bytes());
        }
    }

    /// The finished object.
    pub(crate) fn finish(self, kind: Kind, flags: u8, fingerprint: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.payload.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.push(kind as u8);
        out.push(flags);
        out.extend_from_slice(&fingerprint.to_le_bytes());
        out.extend_from_slice(&(self.payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&checksum(&self.payload).to_le_bytes());
        out.extend_from_slice(&self.payload);
        out
    }
}

/// The parsed header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    pub(crate) flags: u8,
    pub(crate) fingerprint: u64,
}

/// Reads a payload with every access bounds-checked.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Checks the header of `bytes` for an object of `kind` and returns it
    /// with a reader over the verified payload.
    pub(crate) fn open(bytes: &'a [u8], kind: Kind) -> Result<(Header, Self)> {
        let mut head = Reader { bytes };
        let magic = head.take(4)?;
        if magic != MAGIC {
            return Err(SerializationError::BadMagic.into());
        }
        let version = u16::from_le_bytes([head.u8()?, head.u8()?]);
        if version != FORMAT_VERSION {
            return Err(SerializationError::UnsupportedVersion {
                version,
                supported: FORMAT_VERSION,
            }
            .into());
        }
        let found = head.u8()?;
        let found =
            Kind::from_u8(found).ok_or(SerializationError::InvalidField { field: "kind" })?;
        if found != kind {
            return Err(SerializationError::WrongKind {
                expected: kind.name(),
                found: found.name(),
            }
            .into());
        }
        let flags = head.u8()?;
        let fingerprint = head.u64()?;
        let length = head.u64()?;
        let sum = head.u64()?;
        let available = head.bytes.len() as u64;
        if length > available {
            return Err(SerializationError::Truncated {
                needed: length - available,
                available,
            }
            .into());
        }
        if length < available {
            return Err(SerializationError::TrailingBytes {
                extra: available - length,
            }
            .into());
        }
        if checksum(head.bytes) != sum {
            return Err(SerializationError::Corrupted.into());
        }
        Ok((Header { flags, fingerprint }, Reader { bytes: head.bytes }))
    }

    /// A reader over raw bytes (for nested payload sections).
    pub(crate) fn take(&mut self, count: usize) -> Result<&'a [u8]> {
        if count > self.bytes.len() {
            return Err(SerializationError::Truncated {
                needed: (count - self.bytes.len()) as u64,
                available: self.bytes.len() as u64,
            }
            .into());
        }
        let (head, tail) = self.bytes.split_at(count);
        self.bytes = tail;
        Ok(head)
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len()
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?.first().copied().unwrap_or(0))
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    pub(crate) fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// `count` words, checked against the bytes present before allocating.
    pub(crate) fn words(&mut self, count: usize) -> Result<Vec<u64>> {
        let bytes = self.take(
            count
                .checked_mul(8)
                .ok_or(SerializationError::InvalidField { field: "length" })?,
        )?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w.copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect())
    }

    /// Fails unless everything was read.
    pub(crate) fn finish(self) -> Result<()> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(SerializationError::TrailingBytes {
                extra: self.bytes.len() as u64,
            }
            .into())
        }
    }
}
