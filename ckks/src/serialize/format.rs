//! The stream layout (header, checksummed frames, end marker) and the
//! streaming [`Writer`] and [`Reader`] every object goes through.

use std::io::{self, Read, Write};

use zeroize::{Zeroize, Zeroizing};

use crate::{Result, SerializationError};

/// The magic number every object starts with.
pub const MAGIC: [u8; 4] = *b"HEMM";

/// The format version this build writes and reads.
///
/// Versions 1 and 2 (one header with a length and a checksum over an
/// in-memory payload; version 2 added the switching keys' level) and 3 (whose
/// parameter fingerprint covered only the degree, gadget rank, secret weight
/// and primes) are refused with [`SerializationError::UnsupportedVersion`].
pub const FORMAT_VERSION: u16 = 4;

/// Header bytes: magic, version, kind, flags, fingerprint, header CRC.
pub(crate) const HEADER_BYTES: usize = 20;

/// Payload bytes per frame the writer emits.
pub(crate) const FRAME_BYTES: usize = 1 << 20;

/// The largest frame a reader accepts (a bound on its buffer).
pub(crate) const MAX_FRAME_BYTES: usize = 1 << 24;

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
    /// A bootstrapping key set (hemem-bootstrap's `BootstrapKeys`: a key set
    /// and the sparse-secret encapsulation keys).
    BootstrapKeys = 8,
}

impl Kind {
    /// A name for errors.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Parameters => "parameter set",
            Self::SecretKey => "secret key",
            Self::PublicKey => "public key",
            Self::SwitchingKey => "switching key",
            Self::KeySet => "key set",
            Self::Plaintext => "plaintext",
            Self::Ciphertext => "ciphertext",
            Self::BootstrapKeys => "bootstrap key set",
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
            Self::BootstrapKeys,
        ]
        .into_iter()
        .find(|k| *k as u8 == v)
    }
}

pub(crate) fn io_error(e: &io::Error) -> crate::Error {
    SerializationError::Io { kind: e.kind() }.into()
}

/// The header fields a loader checks against its context.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    /// The fingerprint of the parameters the object was made for.
    pub fingerprint: u64,
}

/// Writes one object to a [`Write`]: the header at once, then the payload in
/// checksummed frames of at most 1 MiB, so nothing larger than one frame is
/// ever buffered; [`Writer::finish`] writes the end marker.
///
/// The frame buffer is zeroed when it is dropped (it may hold secret-key
/// bytes). The CRC-32 (`crc32fast`) detects accidental corruption and
/// truncation; it does not authenticate.
pub struct Writer<W: Write> {
    inner: W,
    frame: Zeroizing<Vec<u8>>,
    crc: crc32fast::Hasher,
    written: u64,
}

impl<W: Write> std::fmt::Debug for Writer<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

/// Writes `bytes` to `inner` and into the running checksum.
fn emit<W: Write>(
    inner: &mut W,
    crc: &mut crc32fast::Hasher,
    written: &mut u64,
    bytes: &[u8],
) -> Result<()> {
    inner.write_all(bytes).map_err(|e| io_error(&e))?;
    crc.update(bytes);
    *written += bytes.len() as u64;
    Ok(())
}

impl<W: Write> Writer<W> {
    /// Starts an object of `kind` for parameters with `fingerprint`: writes
    /// its header.
    ///
    /// # Errors
    /// [`SerializationError::Io`].
    pub fn new(inner: W, kind: Kind, fingerprint: u64) -> Result<Self> {
        let mut w = Self {
            inner,
            frame: Zeroizing::new(Vec::with_capacity(FRAME_BYTES)),
            crc: crc32fast::Hasher::new(),
            written: 0,
        };
        let mut head = Vec::with_capacity(HEADER_BYTES);
        head.extend_from_slice(&MAGIC);
        head.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        head.push(kind as u8);
        head.push(0);
        head.extend_from_slice(&fingerprint.to_le_bytes());
        let check = crc32fast::hash(&head);
        head.extend_from_slice(&check.to_le_bytes());
        emit(&mut w.inner, &mut w.crc, &mut w.written, &head)?;
        Ok(w)
    }

    /// Emits the buffered payload as one frame: length, bytes, running CRC.
    fn flush_frame(&mut self) -> Result<()> {
        if self.frame.is_empty() {
            return Ok(());
        }
        let len = self.frame.len() as u32;
        emit(
            &mut self.inner,
            &mut self.crc,
            &mut self.written,
            &len.to_le_bytes(),
        )?;
        emit(
            &mut self.inner,
            &mut self.crc,
            &mut self.written,
            &self.frame,
        )?;
        let sum = self.crc.clone().finalize();
        emit(
            &mut self.inner,
            &mut self.crc,
            &mut self.written,
            &sum.to_le_bytes(),
        )?;
        self.frame.clear();
        Ok(())
    }

    /// Raw payload bytes.
    ///
    /// # Errors
    /// [`SerializationError::Io`].
    pub fn bytes(&mut self, mut v: &[u8]) -> Result<()> {
        while !v.is_empty() {
            let space = FRAME_BYTES.saturating_sub(self.frame.len());
            let (head, tail) = v.split_at(space.min(v.len()));
            self.frame.extend_from_slice(head);
            v = tail;
            if self.frame.len() >= FRAME_BYTES {
                self.flush_frame()?;
            }
        }
        Ok(())
    }

    /// One byte.
    ///
    /// # Errors
    /// [`SerializationError::Io`].
    pub fn u8(&mut self, v: u8) -> Result<()> {
        self.bytes(&[v])
    }

    /// A little-endian `u32`.
    ///
    /// # Errors
    /// [`SerializationError::Io`].
    pub fn u32(&mut self, v: u32) -> Result<()> {
        self.bytes(&v.to_le_bytes())
    }

    /// A little-endian `u64`.
    ///
    /// # Errors
    /// [`SerializationError::Io`].
    pub fn u64(&mut self, v: u64) -> Result<()> {
        self.bytes(&v.to_le_bytes())
    }

    /// An `f64` by its bits.
    ///
    /// # Errors
    /// [`SerializationError::Io`].
    pub fn f64(&mut self, v: f64) -> Result<()> {
        self.u64(v.to_bits())
    }

    /// Little-endian words, converted straight into the frame buffer.
    ///
    /// # Errors
    /// [`SerializationError::Io`].
    pub fn words(&mut self, mut v: &[u64]) -> Result<()> {
        while !v.is_empty() {
            let start = self.frame.len();
            let fit = FRAME_BYTES.saturating_sub(start) / 8;
            if fit == 0 {
                self.flush_frame()?;
                continue;
            }
            let (head, tail) = v.split_at(fit.min(v.len()));
            self.frame.resize(start + head.len() * 8, 0);
            if let Some(dst) = self.frame.get_mut(start..) {
                for (d, w) in dst.chunks_exact_mut(8).zip(head) {
                    d.copy_from_slice(&w.to_le_bytes());
                }
            }
            v = tail;
            if self.frame.len() + 8 > FRAME_BYTES {
                self.flush_frame()?;
            }
        }
        Ok(())
    }

    /// Bytes written to the underlying writer so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Writes the last frame and the end marker, flushes, and returns the
    /// underlying writer.
    ///
    /// # Errors
    /// [`SerializationError::Io`].
    pub fn finish(mut self) -> Result<W> {
        self.flush_frame()?;
        emit(
            &mut self.inner,
            &mut self.crc,
            &mut self.written,
            &0u32.to_le_bytes(),
        )?;
        let sum = self.crc.clone().finalize();
        emit(
            &mut self.inner,
            &mut self.crc,
            &mut self.written,
            &sum.to_le_bytes(),
        )?;
        self.inner.flush().map_err(|e| io_error(&e))?;
        let Self { inner, .. } = self;
        Ok(inner)
    }
}

/// Reads one object from a [`Read`], a frame at a time: each frame's CRC is
/// checked before any of its bytes are handed out, so every field a loader
/// parses has been verified. Nothing larger than one frame is buffered; the
/// buffer is zeroed when it is dropped.
pub struct Reader<R: Read> {
    inner: R,
    frame: Zeroizing<Vec<u8>>,
    pos: usize,
    crc: crc32fast::Hasher,
    offset: u64,
    ended: bool,
}

impl<R: Read> std::fmt::Debug for Reader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl<R: Read> Reader<R> {
    /// Reads and checks the header of an object of `kind`: magic, version,
    /// header checksum (which covers the flags), kind and flags (none is
    /// defined: the byte must be 0). The caller checks the fingerprint.
    ///
    /// # Errors
    /// [`SerializationError`]: `BadMagic`, `UnsupportedVersion`,
    /// `Corrupted`, `WrongKind`, `InvalidField`, `UnknownFlags`,
    /// `Truncated`, `Io`.
    pub fn open(inner: R, kind: Kind) -> Result<(Header, Self)> {
        let mut r = Self {
            inner,
            frame: Zeroizing::new(Vec::new()),
            pos: 0,
            crc: crc32fast::Hasher::new(),
            offset: 0,
            ended: false,
        };
        let mut head = [0u8; HEADER_BYTES];
        let got = r.read_raw(&mut head)?;
        let field = |at: usize, len: usize| head.get(at..at + len).unwrap_or_default();
        if got >= 4 && field(0, 4) != MAGIC {
            return Err(SerializationError::BadMagic.into());
        }
        if got < HEADER_BYTES {
            return Err(r.truncated(HEADER_BYTES - got));
        }
        let byte = |at: usize| head.get(at).copied().unwrap_or(0);
        let version = u16::from_le_bytes([byte(4), byte(5)]);
        if version != FORMAT_VERSION {
            return Err(SerializationError::UnsupportedVersion {
                version,
                supported: FORMAT_VERSION,
            }
            .into());
        }
        if crc32fast::hash(field(0, 16)).to_le_bytes() != field(16, 4) {
            return Err(SerializationError::Corrupted.into());
        }
        let found =
            Kind::from_u8(byte(6)).ok_or(SerializationError::InvalidField { field: "kind" })?;
        if found != kind {
            return Err(SerializationError::WrongKind {
                expected: kind.name(),
                found: found.name(),
            }
            .into());
        }
        // No flag is defined: any set bit is a feature this build lacks.
        // (The flags are covered by the header checksum checked above.)
        let flags = byte(7);
        if flags != 0 {
            return Err(SerializationError::UnknownFlags { flags }.into());
        }
        let mut fp = [0u8; 8];
        fp.copy_from_slice(field(8, 8));
        let fingerprint = u64::from_le_bytes(fp);
        Ok((Header { fingerprint }, r))
    }

    fn truncated(&self, needed: usize) -> crate::Error {
        SerializationError::Truncated {
            needed: needed as u64,
            available: self.offset,
        }
        .into()
    }

    /// Reads from the stream until `buf` is full or the stream ends; the
    /// bytes go into the running checksum. Returns the count read.
    fn read_raw(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut got = 0;
        while let Some(rest) = buf.get_mut(got..) {
            if rest.is_empty() {
                break;
            }
            match self.inner.read(rest) {
                Ok(0) => break,
                Ok(n) => {
                    if let Some(read) = rest.get(..n) {
                        self.crc.update(read);
                    }
                    got += n;
                    self.offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(&e)),
            }
        }
        Ok(got)
    }

    fn read_exact_raw(&mut self, buf: &mut [u8]) -> Result<()> {
        let got = self.read_raw(buf)?;
        if got < buf.len() {
            return Err(self.truncated(buf.len() - got));
        }
        Ok(())
    }

    /// Reads a running CRC field and compares it with the bytes so far.
    fn check_crc(&mut self) -> Result<()> {
        let expected = self.crc.clone().finalize();
        let mut sum = [0u8; 4];
        self.read_exact_raw(&mut sum)?;
        if u32::from_le_bytes(sum) == expected {
            Ok(())
        } else {
            Err(SerializationError::Corrupted.into())
        }
    }

    /// Loads the next frame; `false` at the end marker.
    fn next_frame(&mut self) -> Result<bool> {
        if self.ended {
            return Ok(false);
        }
        let mut len = [0u8; 4];
        self.read_exact_raw(&mut len)?;
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_FRAME_BYTES {
            return Err(SerializationError::Corrupted.into());
        }
        if len == 0 {
            self.check_crc()?;
            self.ended = true;
            self.frame.clear();
            self.pos = 0;
            return Ok(false);
        }
        // The length is not verified until the frame's CRC: the buffer grows
        // only as bytes arrive (to one writer frame at once, then at most
        // doubling what has arrived), so a length claiming more than the
        // stream holds costs at most a writer frame or twice what it holds.
        self.frame.clear();
        let mut filled = 0;
        while filled < len {
            let target = len.min(FRAME_BYTES.max(2 * filled));
            if target > self.frame.capacity() {
                // Replacing the buffer zeroes the old one (never a silent
                // realloc).
                let mut grown = Zeroizing::new(Vec::with_capacity(target));
                grown.extend_from_slice(&self.frame);
                self.frame = grown;
            }
            self.frame.resize(target, 0);
            let mut frame = std::mem::take(&mut *self.frame);
            let read = frame
                .get_mut(filled..)
                .map_or(Ok(()), |rest| self.read_exact_raw(rest));
            *self.frame = frame;
            read?;
            filled = target;
        }
        self.check_crc()?;
        self.pos = 0;
        Ok(true)
    }

    /// The verified bytes of the current frame not yet handed out, loading
    /// the next frame when the current one is spent.
    fn available(&mut self, needed: usize) -> Result<&[u8]> {
        if self.pos >= self.frame.len() && !self.next_frame()? {
            return Err(self.truncated(needed));
        }
        Ok(self.frame.get(self.pos..).unwrap_or_default())
    }

    /// Fills `dst` with payload bytes.
    ///
    /// # Errors
    /// `Truncated`, `Corrupted`, `Io`.
    pub fn bytes_into(&mut self, mut dst: &mut [u8]) -> Result<()> {
        while !dst.is_empty() {
            let needed = dst.len();
            let src = self.available(needed)?;
            let k = src.len().min(needed);
            let (head, tail) = dst.split_at_mut(k);
            head.copy_from_slice(src.get(..k).unwrap_or_default());
            self.pos += k;
            dst = tail;
        }
        Ok(())
    }

    /// One byte.
    ///
    /// # Errors
    /// As [`Reader::bytes_into`].
    pub fn u8(&mut self) -> Result<u8> {
        let mut b = [0u8; 1];
        self.bytes_into(&mut b)?;
        Ok(u8::from_le_bytes(b))
    }

    /// A little-endian `u32`.
    ///
    /// # Errors
    /// As [`Reader::bytes_into`].
    pub fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        self.bytes_into(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// A little-endian `u64`.
    ///
    /// # Errors
    /// As [`Reader::bytes_into`].
    pub fn u64(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        self.bytes_into(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// An `f64` by its bits.
    ///
    /// # Errors
    /// As [`Reader::bytes_into`].
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// Fills `dst` with little-endian words straight from the frame buffer;
    /// returns whether every word is below `bound`.
    ///
    /// # Errors
    /// As [`Reader::bytes_into`].
    pub fn words_below(&mut self, dst: &mut [u64], bound: u64) -> Result<bool> {
        let mut ok = true;
        let mut done = 0;
        while done < dst.len() {
            let left = dst.len() - done;
            let src = self.available(left * 8)?;
            let k = (src.len() / 8).min(left);
            if k == 0 {
                // A word split across two frames.
                let mut b = [0u8; 8];
                self.bytes_into(&mut b)?;
                let w = u64::from_le_bytes(b);
                ok &= w < bound;
                if let Some(slot) = dst.get_mut(done) {
                    *slot = w;
                }
                done += 1;
                continue;
            }
            let out = dst.get_mut(done..done + k).unwrap_or_default();
            for (d, s) in out.iter_mut().zip(src.chunks_exact(8)) {
                let mut b = [0u8; 8];
                b.copy_from_slice(s);
                let w = u64::from_le_bytes(b);
                ok &= w < bound;
                *d = w;
            }
            self.pos += k * 8;
            done += k;
        }
        Ok(ok)
    }

    /// Bytes read from the underlying reader so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Checks that the payload was read exactly, reads the end marker, and
    /// checks that nothing follows it.
    ///
    /// # Errors
    /// `TrailingBytes`, `Corrupted`, `Truncated`, `Io`.
    pub fn finish(mut self) -> Result<()> {
        let left = self.frame.len().saturating_sub(self.pos);
        if left > 0 {
            return Err(SerializationError::TrailingBytes { extra: left as u64 }.into());
        }
        if self.next_frame()? {
            return Err(SerializationError::TrailingBytes {
                extra: self.frame.len() as u64,
            }
            .into());
        }
        let mut extra = 0u64;
        let mut probe = [0u8; 4096];
        loop {
            match self.inner.read(&mut probe) {
                Ok(0) => break,
                Ok(n) => extra += n as u64,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(&e)),
            }
        }
        probe.zeroize();
        if extra > 0 {
            return Err(SerializationError::TrailingBytes { extra }.into());
        }
        Ok(())
    }
}

/// Walks the frames of `bytes` (a whole object), calling `visit` with each
/// frame's payload and its payload offset, then recomputes every checksum.
#[cfg(any(test, feature = "test-utils"))]
pub(crate) fn reframe(bytes: &[u8], mut visit: impl FnMut(&mut [u8], usize)) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if out.len() < HEADER_BYTES {
        return out;
    }
    let sum = crc32fast::hash(out.get(..16).unwrap_or_default());
    if let Some(slot) = out.get_mut(16..20) {
        slot.copy_from_slice(&sum.to_le_bytes());
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(out.get(..HEADER_BYTES).unwrap_or_default());
    let mut at = HEADER_BYTES;
    let mut payload_offset = 0;
    while let Some(len) = out.get(at..at + 4) {
        let mut b = [0u8; 4];
        b.copy_from_slice(len);
        let len = u32::from_le_bytes(b) as usize;
        if at + 8 + len > out.len() {
            break;
        }
        if let Some(frame) = out.get_mut(at + 4..at + 4 + len) {
            visit(frame, payload_offset);
        }
        payload_offset += len;
        crc.update(out.get(at..at + 4 + len).unwrap_or_default());
        let sum = crc.clone().finalize();
        if let Some(slot) = out.get_mut(at + 4 + len..at + 8 + len) {
            slot.copy_from_slice(&sum.to_le_bytes());
        }
        crc.update(&sum.to_le_bytes());
        at += 8 + len;
        if len == 0 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame length field claiming 16 MiB over a few bytes is refused
    /// (truncated) with no buffer beyond one writer frame; claims are
    /// believed only as far as bytes arrive.
    #[test]
    fn a_frame_length_allocates_only_what_arrives() {
        let mut bytes = Vec::new();
        let mut w = Writer::new(&mut bytes, Kind::Plaintext, 7).unwrap();
        w.bytes(&[1, 2, 3]).unwrap();
        w.finish().unwrap();
        bytes[HEADER_BYTES..HEADER_BYTES + 4]
            .copy_from_slice(&(MAX_FRAME_BYTES as u32).to_le_bytes());
        let (_, mut r) = Reader::open(&bytes[..], Kind::Plaintext).unwrap();
        assert!(matches!(
            r.next_frame(),
            Err(crate::Error::Serialization(
                SerializationError::Truncated { .. }
            ))
        ));
        assert!(r.frame.capacity() <= FRAME_BYTES, "{}", r.frame.capacity());

        // Past one writer frame, the buffer at most doubles what arrived.
        let body = vec![5u8; FRAME_BYTES + 10];
        let mut long = bytes[..HEADER_BYTES].to_vec();
        long.extend_from_slice(&(MAX_FRAME_BYTES as u32).to_le_bytes());
        long.extend_from_slice(&body);
        let (_, mut r) = Reader::open(&long[..], Kind::Plaintext).unwrap();
        assert!(r.next_frame().is_err());
        assert!(
            r.frame.capacity() <= 2 * FRAME_BYTES,
            "{}",
            r.frame.capacity()
        );
    }

    /// Frames larger than the writer's (up to the format's bound) still load.
    #[test]
    fn frames_up_to_the_bound_load() {
        let mut bytes = Vec::new();
        let w = Writer::new(&mut bytes, Kind::Plaintext, 7).unwrap();
        w.finish().unwrap();
        bytes.truncate(HEADER_BYTES);
        let len = 3 * FRAME_BYTES + 5;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&bytes);
        let mut frame = (len as u32).to_le_bytes().to_vec();
        frame.extend((0..len).map(|i| i as u8));
        crc.update(&frame);
        bytes.extend_from_slice(&frame);
        let sum = crc.clone().finalize().to_le_bytes();
        crc.update(&sum);
        bytes.extend_from_slice(&sum);
        crc.update(&0u32.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&crc.finalize().to_le_bytes());
        let (_, mut r) = Reader::open(&bytes[..], Kind::Plaintext).unwrap();
        let mut out = vec![0u8; len];
        r.bytes_into(&mut out).unwrap();
        assert!(out.iter().enumerate().all(|(i, &b)| b == i as u8));
        r.finish().unwrap();
    }
}
