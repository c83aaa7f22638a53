//! The serialized form of each object, written and read one polynomial at a
//! time through [`Writer`] and [`Reader`].

use std::io::{Read, Write};

use hemem_memory::MemoryClass;
use zeroize::Zeroizing;

use super::format::{FRAME_BYTES, HEADER_BYTES, Kind, Reader, Writer};
use crate::backend::{Limbs, LimbsMut, contiguous};
use crate::context::Context;
use crate::poly::{Representation, RnsPoly};
use crate::{Result, SerializationError};

#[cfg(test)]
mod edited_parameter_files;
mod keys;
mod params;
#[cfg(test)]
mod tests;
mod values;

pub use keys::keys_fingerprint;

const NONE_U32: u32 = u32::MAX;

/// Bytes of host staging per transfer when a polynomial lives on a device.
const STAGING_BYTES: usize = 4 << 20;

fn invalid(field: &'static str) -> crate::Error {
    SerializationError::InvalidField { field }.into()
}

/// Limbs per staging transfer at degree `n`.
fn staging_limbs(n: usize) -> usize {
    (STAGING_BYTES / (8 * n.max(1))).max(1)
}

/// Writes a polynomial: its limb count, its global modulus indices, then its
/// words limb after limb. A host polynomial is written from its own memory;
/// a device polynomial is downloaded a few limbs at a time into a small host
/// buffer (zeroed afterwards when the polynomial is secret material).
pub(crate) fn write_poly<W: Write, R: Representation>(
    w: &mut Writer<W>,
    p: &RnsPoly<R>,
) -> Result<()> {
    let count = p.limb_count();
    w.u32(count as u32)?;
    for &m in p.moduli() {
        w.u32(m as u32)?;
    }
    let n = p.backend().degree();
    if let Ok(words) = p.buffer().host_words() {
        let words = words.get(..count * n).ok_or(crate::Error::LengthMismatch {
            expected: count * n,
            actual: words.len(),
        })?;
        return w.words(words);
    }
    let group = staging_limbs(n).min(count);
    let mut staging = Zeroizing::new(vec![0u64; group * n]);
    let mut start = 0;
    while start < count {
        let c = group.min(count - start);
        let moduli = p.moduli().get(start..start + c).unwrap_or_default();
        let view = Limbs {
            buffer: p.buffer(),
            positions: contiguous(start, c)?,
            moduli,
        };
        let buf = staging.get_mut(..c * n).unwrap_or_default();
        p.backend().read(view, buf)?;
        w.words(buf)?;
        start += c;
    }
    Ok(())
}

/// Reads a polynomial that must have exactly the moduli `expected`, with
/// every residue below its prime, straight into a new polynomial of `class`
/// on the context's device (through a small host buffer when that is a GPU).
pub(crate) fn read_poly<Rd: Read, R: Representation>(
    r: &mut Reader<Rd>,
    context: &Context,
    expected: &[usize],
    class: MemoryClass,
) -> Result<RnsPoly<R>> {
    let count = r.u32()? as usize;
    if count != expected.len() {
        return Err(invalid("limb count"));
    }
    for &m in expected {
        if r.u32()? as usize != m {
            return Err(invalid("modulus index"));
        }
    }
    let params = context.params();
    let n = params.degree().get();
    let table = params.all_moduli();
    let primes = expected
        .iter()
        .map(|&m| table.get(m).map(|q| q.value()))
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| invalid("modulus index"))?;
    let backend = context.backend();
    let mut p = RnsPoly::<R>::allocate(backend, expected, class, false)?;
    let mut below = true;
    if let Ok(words) = p.buffer_mut().host_words_mut() {
        let words = words
            .get_mut(..count * n)
            .ok_or(crate::Error::LengthMismatch {
                expected: count * n,
                actual: 0,
            })?;
        for (limb, &q) in words.chunks_exact_mut(n).zip(&primes) {
            below &= r.words_below(limb, q)?;
        }
    } else {
        let group = staging_limbs(n).min(count);
        let mut staging = vec![0u64; group * n];
        let mut start = 0;
        while start < count {
            let c = group.min(count - start);
            let buf = staging.get_mut(..c * n).unwrap_or_default();
            let qs = primes.get(start..start + c).unwrap_or_default();
            for (limb, &q) in buf.chunks_exact_mut(n).zip(qs) {
                below &= r.words_below(limb, q)?;
            }
            let view = LimbsMut {
                buffer: p.buffer_mut(),
                positions: contiguous(start, c)?,
                moduli: expected.get(start..start + c).unwrap_or_default(),
            };
            backend.write(view, buf)?;
            start += c;
        }
    }
    if below {
        Ok(p)
    } else {
        Err(invalid("residue"))
    }
}

pub(crate) fn check_fingerprint(context: &Context, found: u64) -> Result<()> {
    let expected = context.params().fingerprint();
    if expected == found {
        Ok(())
    } else {
        Err(SerializationError::ParameterMismatch { expected, found }.into())
    }
}

/// Opens an object of `kind` for `context`: header and fingerprint checked.
pub(crate) fn open<R: Read>(r: R, kind: Kind, context: &Context) -> Result<Reader<R>> {
    let (header, reader) = Reader::open(r, kind)?;
    check_fingerprint(context, header.fingerprint)?;
    Ok(reader)
}

fn write_opt<W: Write>(w: &mut Writer<W>, v: Option<usize>) -> Result<()> {
    w.u32(v.map_or(NONE_U32, |v| v as u32))
}

fn read_opt<R: Read>(r: &mut Reader<R>) -> Result<Option<usize>> {
    let v = r.u32()?;
    Ok((v != NONE_U32).then_some(v as usize))
}

fn read_bits<R: Read>(r: &mut Reader<R>, field: &'static str) -> Result<Vec<u32>> {
    let count = r.u32()? as usize;
    if count > crate::params::MAX_FILE_FIELD {
        return Err(invalid(field));
    }
    (0..count).map(|_| r.u32()).collect()
}

/// The bytes an in-memory writer needs for a payload of `payload` bytes, so
/// its vector never reallocates (a reallocation would leave a copy behind).
fn stream_bytes(payload: usize) -> usize {
    HEADER_BYTES + payload + 8 * (payload / FRAME_BYTES + 2)
}
