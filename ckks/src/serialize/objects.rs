//! The serialized form of each object.

use hemem_memory::MemoryClass;
use zeroize::Zeroizing;

use super::format::{Kind, Reader, Writer};
use super::{FromBytes, ToBytes};
use crate::context::Context;
use crate::encoding::Plaintext;
use crate::eval::Ciphertext;
use crate::keys::{KeyKind, KeySet, PublicKey, SecretKey, SwitchingKey};
use crate::ntt::GaloisElement;
use crate::params::{Level, Parameters, ParametersSpec, Scale, SecurityCheck};
use crate::poly::{Representation, RnsPoly};
use crate::{Result, SerializationError};

const COMPRESSED: u8 = 1;
const NONE_U32: u32 = u32::MAX;

fn invalid(field: &'static str) -> crate::Error {
    SerializationError::InvalidField { field }.into()
}

fn write_poly<R: Representation>(w: &mut Writer, p: &RnsPoly<R>) -> Result<()> {
    w.u32(p.limb_count() as u32);
    for &m in p.moduli() {
        w.u32(m as u32);
    }
    w.words(&p.to_words()?);
    Ok(())
}

/// Reads a polynomial that must have exactly the moduli `expected`, with
/// every residue below its prime.
fn read_poly<R: Representation>(
    r: &mut Reader<'_>,
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
    let n = context.params().degree().get();
    let words = r.words(count * n)?;
    let table = context.params().all_moduli();
    for (limb, &m) in words.chunks_exact(n).zip(expected) {
        let q = table
            .get(m)
            .ok_or_else(|| invalid("modulus index"))?
            .value();
        if limb.iter().any(|&w| w >= q) {
            return Err(invalid("residue"));
        }
    }
    RnsPoly::from_words(context.backend(), expected, class, &words)
}

fn check_fingerprint(context: &Context, found: u64) -> Result<()> {
    let expected = context.params().fingerprint();
    if expected == found {
        Ok(())
    } else {
        Err(SerializationError::ParameterMismatch { expected, found }.into())
    }
}

fn write_opt(w: &mut Writer, v: Option<usize>) {
    w.u32(v.map_or(NONE_U32, |v| v as u32));
}

fn read_opt(r: &mut Reader<'_>) -> Result<Option<usize>> {
    let v = r.u32()?;
    Ok((v != NONE_U32).then_some(v as usize))
}

fn read_bits(r: &mut Reader<'_>, field: &'static str) -> Result<Vec<u32>> {
    let count = r.u32()? as usize;
    if count > 256 || count * 4 > r.remaining() {
        return Err(invalid(field));
    }
    (0..count).map(|_| r.u32()).collect()
}

impl Parameters {
    /// The parameters' description in hemem's binary format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let spec = self.spec();
        let mut w = Writer::default();
        w.u32(spec.name.len() as u32);
        w.bytes(spec.name.as_bytes());
        w.u32(spec.log_n);
        w.u32(spec.log_slots);
        w.u32(spec.q_bits.len() as u32);
        spec.q_bits.iter().for_each(|&b| w.u32(b));
        w.u32(spec.p_bits.len() as u32);
        spec.p_bits.iter().for_each(|&b| w.u32(b));
        w.u32(spec.dnum as u32);
        w.u32(spec.enc_level as u32);
        write_opt(&mut w, spec.post_bootstrap_level);
        w.u32(spec.user_primes as u32);
        w.u32(spec.hamming_weight as u32);
        write_opt(&mut w, spec.claimed_security_bits.map(|b| b as usize));
        w.u8(u8::from(spec.insecure_test));
        write_opt(&mut w, spec.bootstrap_rotation_keys);
        w.finish(Kind::Parameters, 0, self.fingerprint())
    }

    /// Loads parameters, rebuilding the primes and checking the fingerprint.
    ///
    /// # Errors
    /// A [`SerializationError`] for malformed data; the errors of
    /// [`Parameters::new`] (insecure parameters need `check` to allow them).
    pub fn from_bytes(bytes: &[u8], check: SecurityCheck) -> Result<Self> {
        let (header, mut r) = Reader::open(bytes, Kind::Parameters)?;
        let name_len = r.u32()? as usize;
        if name_len > 256 {
            return Err(invalid("name"));
        }
        let name = std::str::from_utf8(r.take(name_len)?)
            .map_err(|_| invalid("name"))?
            .to_owned();
        let log_n = r.u32()?;
        let log_slots = r.u32()?;
        let q_bits = read_bits(&mut r, "q_bits")?;
        let p_bits = read_bits(&mut r, "p_bits")?;
        let dnum = r.u32()? as usize;
        let enc_level = r.u32()? as usize;
        let post_bootstrap_level = read_opt(&mut r)?;
        let user_primes = r.u32()? as usize;
        let hamming_weight = r.u32()? as usize;
        let claimed_security_bits = read_opt(&mut r)?.map(|b| b as u32);
        let insecure_test = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(invalid("insecure_test")),
        };
        let bootstrap_rotation_keys = read_opt(&mut r)?;
        r.finish()?;
        let spec = ParametersSpec {
            name,
            log_n,
            log_slots,
            q_bits,
            p_bits,
            dnum,
            enc_level,
            post_bootstrap_level,
            user_primes,
            hamming_weight,
            claimed_security_bits,
            insecure_test,
            bootstrap_rotation_keys,
        };
        let params = Parameters::new(spec, check)?;
        if params.fingerprint() != header.fingerprint {
            return Err(SerializationError::ParameterMismatch {
                expected: params.fingerprint(),
                found: header.fingerprint,
            }
            .into());
        }
        Ok(params)
    }
}

impl SecretKey {
    /// The secret key in hemem's binary format: one byte per ternary
    /// coefficient. The result is secret material: it is zeroized on drop.
    pub fn to_bytes(&self) -> Zeroizing<Vec<u8>> {
        let mut w = Writer::default();
        w.u32(self.coefficients.len() as u32);
        for &c in self.coefficients.iter() {
            w.u8(c as i8 as u8);
        }
        Zeroizing::new(w.finish(Kind::SecretKey, 0, self.context.params().fingerprint()))
    }

    /// Loads a secret key into `context` (on its device).
    ///
    /// # Errors
    /// A [`SerializationError`]: malformed data, other parameters, a
    /// coefficient outside {−1, 0, 1}.
    pub fn from_bytes(context: &Context, bytes: &[u8]) -> Result<Self> {
        let (header, mut r) = Reader::open(bytes, Kind::SecretKey)?;
        check_fingerprint(context, header.fingerprint)?;
        let n = context.params().degree().get();
        if r.u32()? as usize != n {
            return Err(invalid("degree"));
        }
        let raw = r.take(n)?;
        let mut coefficients = Zeroizing::new(Vec::with_capacity(n));
        for &b in raw {
            coefficients.push(match b {
                0 => 0,
                1 => 1,
                0xff => -1,
                _ => return Err(invalid("secret coefficient")),
            });
        }
        r.finish()?;
        SecretKey::from_coefficients(context, coefficients)
    }
}

impl ToBytes for PublicKey {
    fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        write_poly(&mut w, &self.b)?;
        write_poly(&mut w, &self.a)?;
        Ok(w.finish(Kind::PublicKey, 0, self.context.params().fingerprint()))
    }
}

impl FromBytes for PublicKey {
    fn from_bytes(context: &Context, bytes: &[u8]) -> Result<Self> {
        let (header, mut r) = Reader::open(bytes, Kind::PublicKey)?;
        check_fingerprint(context, header.fingerprint)?;
        let all = context.params().qp_indices(context.params().max_level());
        let b = read_poly(&mut r, context, &all, MemoryClass::EvaluationKey)?;
        let a = read_poly(&mut r, context, &all, MemoryClass::EvaluationKey)?;
        r.finish()?;
        Ok(PublicKey {
            context: context.clone(),
            b,
            a,
        })
    }
}

impl SwitchingKey {
    fn write(&self, compressed: bool) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        let (tag, galois) = match self.kind {
            KeyKind::Relinearization => (0u8, 0u64),
            KeyKind::Rotation(g) => (1, g.0),
            KeyKind::Conjugation => (2, 0),
            KeyKind::Generic => (3, 0),
        };
        w.u8(tag);
        w.u64(galois);
        w.u32(self.level.0 as u32);
        w.bytes(&self.seed);
        w.u32(self.b.len() as u32);
        for b in &self.b {
            write_poly(&mut w, b)?;
        }
        let compressed = compressed || self.a.is_none();
        if !compressed {
            for a in self.a.iter().flatten() {
                write_poly(&mut w, a)?;
            }
        }
        let flags = if compressed { COMPRESSED } else { 0 };
        Ok(w.finish(
            Kind::SwitchingKey,
            flags,
            self.context.params().fingerprint(),
        ))
    }

    /// The key with its uniform halves replaced by their seed: half the bytes.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_bytes_compressed(&self) -> Result<Vec<u8>> {
        self.write(true)
    }
}

impl ToBytes for SwitchingKey {
    /// The key as held: compressed if it is compressed, in full otherwise.
    fn to_bytes(&self) -> Result<Vec<u8>> {
        self.write(false)
    }
}

impl FromBytes for SwitchingKey {
    /// Loads a key; a compressed key stays compressed (call
    /// [`SwitchingKey::expand`] to regenerate its uniform halves up front).
    fn from_bytes(context: &Context, bytes: &[u8]) -> Result<Self> {
        let (header, mut r) = Reader::open(bytes, Kind::SwitchingKey)?;
        check_fingerprint(context, header.fingerprint)?;
        if header.flags & !COMPRESSED != 0 {
            return Err(invalid("flags"));
        }
        let params = context.params();
        let n = params.degree().get();
        let tag = r.u8()?;
        let galois = r.u64()?;
        let kind = match tag {
            0 => KeyKind::Relinearization,
            1 if galois % 2 == 1 && galois < 2 * n as u64 && galois != 1 => {
                KeyKind::Rotation(GaloisElement(galois))
            }
            2 => KeyKind::Conjugation,
            3 => KeyKind::Generic,
            _ => return Err(invalid("key kind")),
        };
        let level = Level(r.u32()? as usize);
        if level > params.max_level() {
            return Err(invalid("key level"));
        }
        let mut seed = [0u8; 32];
        seed.copy_from_slice(r.take(32)?);
        let digits = r.u32()? as usize;
        if digits != params.digits_at(level) {
            return Err(invalid("digits"));
        }
        let all = params.qp_indices(level);
        let b = (0..digits)
            .map(|_| read_poly(&mut r, context, &all, MemoryClass::EvaluationKey))
            .collect::<Result<Vec<_>>>()?;
        let a = if header.flags & COMPRESSED != 0 {
            None
        } else {
            Some(
                (0..digits)
                    .map(|_| read_poly(&mut r, context, &all, MemoryClass::EvaluationKey))
                    .collect::<Result<Vec<_>>>()?,
            )
        };
        r.finish()?;
        Ok(SwitchingKey {
            context: context.clone(),
            kind,
            level,
            seed,
            b,
            a,
        })
    }
}

impl KeySet {
    fn write(&self, fingerprint: u64, compressed: bool) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        let keys: Vec<&SwitchingKey> = self.keys().collect();
        w.u32(keys.len() as u32);
        for key in keys {
            let blob = key.write(compressed)?;
            w.u64(blob.len() as u64);
            w.bytes(&blob);
        }
        Ok(w.finish(
            Kind::KeySet,
            if compressed { COMPRESSED } else { 0 },
            fingerprint,
        ))
    }

    /// Every key of the set, compressed.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_bytes_compressed(&self, context: &Context) -> Result<Vec<u8>> {
        self.write(context.params().fingerprint(), true)
    }

    /// Every key of the set as held.
    ///
    /// # Errors
    /// Transfer errors.
    pub fn to_bytes(&self, context: &Context) -> Result<Vec<u8>> {
        self.write(context.params().fingerprint(), false)
    }

    /// Loads a key set into `context`.
    ///
    /// # Errors
    /// As [`SwitchingKey::from_bytes`], and a generic key inside a set.
    pub fn from_bytes(context: &Context, bytes: &[u8]) -> Result<Self> {
        let (header, mut r) = Reader::open(bytes, Kind::KeySet)?;
        check_fingerprint(context, header.fingerprint)?;
        let count = r.u32()? as usize;
        let mut set = KeySet::new();
        for _ in 0..count {
            let len = usize::try_from(r.u64()?).map_err(|_| invalid("key length"))?;
            let blob = r.take(len)?;
            set.insert(SwitchingKey::from_bytes(context, blob)?)?;
        }
        r.finish()?;
        Ok(set)
    }
}

fn write_header_fields(w: &mut Writer, level: Level, scale: Scale, slots: usize) {
    w.u32(level.0 as u32);
    w.f64(scale.0);
    w.u32(slots as u32);
}

fn read_header_fields(r: &mut Reader<'_>, context: &Context) -> Result<(Level, Scale, usize)> {
    let params = context.params();
    let level = Level(r.u32()? as usize);
    if level > params.max_level() {
        return Err(invalid("level"));
    }
    let scale = Scale(r.f64()?);
    if !(scale.0.is_finite() && scale.0 > 0.0) {
        return Err(invalid("scale"));
    }
    let slots = r.u32()? as usize;
    if slots == 0 || !slots.is_power_of_two() || slots > params.degree().get() / 2 {
        return Err(invalid("slots"));
    }
    Ok((level, scale, slots))
}

impl ToBytes for Plaintext {
    fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        write_header_fields(&mut w, self.level, self.scale, self.slots);
        write_poly(&mut w, &self.poly)?;
        Ok(w.finish(Kind::Plaintext, 0, self.context.params().fingerprint()))
    }
}

impl FromBytes for Plaintext {
    fn from_bytes(context: &Context, bytes: &[u8]) -> Result<Self> {
        let (header, mut r) = Reader::open(bytes, Kind::Plaintext)?;
        check_fingerprint(context, header.fingerprint)?;
        let (level, scale, slots) = read_header_fields(&mut r, context)?;
        let moduli = context.params().q_indices(level);
        let poly = read_poly(&mut r, context, &moduli, MemoryClass::Plaintext)?;
        r.finish()?;
        Ok(Plaintext {
            context: context.clone(),
            poly,
            level,
            scale,
            slots,
        })
    }
}

impl ToBytes for Ciphertext {
    fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        write_header_fields(&mut w, self.level, self.scale, self.slots);
        write_poly(&mut w, &self.c0)?;
        write_poly(&mut w, &self.c1)?;
        Ok(w.finish(Kind::Ciphertext, 0, self.context.params().fingerprint()))
    }
}

impl FromBytes for Ciphertext {
    fn from_bytes(context: &Context, bytes: &[u8]) -> Result<Self> {
        let (header, mut r) = Reader::open(bytes, Kind::Ciphertext)?;
        check_fingerprint(context, header.fingerprint)?;
        let (level, scale, slots) = read_header_fields(&mut r, context)?;
        let moduli = context.params().q_indices(level);
        let c0 = read_poly(&mut r, context, &moduli, MemoryClass::Ciphertext)?;
        let c1 = read_poly(&mut r, context, &moduli, MemoryClass::Ciphertext)?;
        r.finish()?;
        Ciphertext::from_parts(context, c0, c1, level, scale, slots)
    }
}
