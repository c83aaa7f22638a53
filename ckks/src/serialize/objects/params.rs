//! Parameters: their description saved, judged again when loaded.

use std::io::{Read, Write};
use std::path::Path;

use super::super::Save;
use super::super::files::open_file;
use super::super::format::{Kind, Reader, Writer};
use super::{invalid, read_bits, read_opt, write_opt};
use crate::params::{Parameters, ParametersSpec, SecurityCheck};
use crate::{Result, SerializationError};

impl Parameters {
    pub(super) fn write_body<W: Write>(&self, w: &mut Writer<W>) -> Result<()> {
        let spec = self.spec();
        w.u32(spec.name.len() as u32)?;
        w.bytes(spec.name.as_bytes())?;
        w.u32(spec.log_n)?;
        w.u32(spec.log_slots)?;
        w.u32(spec.q_bits.len() as u32)?;
        for &b in &spec.q_bits {
            w.u32(b)?;
        }
        w.u32(spec.p_bits.len() as u32)?;
        for &b in &spec.p_bits {
            w.u32(b)?;
        }
        w.u32(spec.dnum as u32)?;
        w.u32(spec.enc_level as u32)?;
        write_opt(w, spec.post_bootstrap_level)?;
        w.u32(spec.user_primes as u32)?;
        w.u32(spec.hamming_weight as u32)?;
        write_opt(w, self.preset_claim())?;
        w.u8(u8::from(spec.insecure_test))?;
        write_opt(w, spec.bootstrap_rotation_keys)
    }

    /// The security-claim slot of the file format: a matched preset's claim,
    /// written so that older readers see what they expect, and checked on
    /// loading against hemem's own decision.
    fn preset_claim(&self) -> Option<usize> {
        let security = self.security();
        security.preset.map(|_| security.bits as usize)
    }

    /// Loads parameters from `r`, rebuilding the primes and checking the
    /// fingerprint. The security level is decided again, exactly as for
    /// [`Parameters::new`]: nothing in the file can claim it.
    ///
    /// Every other object loads into a context ([`Load`](crate::serialize::Load)); parameters make
    /// the context, so in its place they take the security decision, last,
    /// as every constructor of [`Parameters`] does (`new(spec, check)`,
    /// `from_preset_with(preset, check)`).
    ///
    /// # Errors
    /// A [`SerializationError`] for malformed data (among them
    /// [`SerializationError::InvalidField`] for a security claim other than
    /// hemem's own, and [`SerializationError::FingerprintMismatch`] when the
    /// fields do not give the header's fingerprint: a field was edited —
    /// every field counts, see [`Parameters::fingerprint`]); the errors of [`Parameters::new`] (insecure parameters
    /// need `check` to allow them).
    pub fn load<R: Read>(r: R, check: SecurityCheck) -> Result<Self> {
        let (header, mut r) = Reader::open(r, Kind::Parameters)?;
        let name_len = r.u32()? as usize;
        if name_len > crate::params::MAX_FILE_FIELD {
            return Err(invalid("name"));
        }
        let mut name = vec![0u8; name_len];
        r.bytes_into(&mut name)?;
        let name = String::from_utf8(name).map_err(|_| invalid("name"))?;
        let log_n = r.u32()?;
        let log_slots = r.u32()?;
        let q_bits = read_bits(&mut r, "q_bits")?;
        let p_bits = read_bits(&mut r, "p_bits")?;
        let dnum = r.u32()? as usize;
        let enc_level = r.u32()? as usize;
        let post_bootstrap_level = read_opt(&mut r)?;
        let user_primes = r.u32()? as usize;
        let hamming_weight = r.u32()? as usize;
        let claim = read_opt(&mut r)?;
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
            insecure_test,
            bootstrap_rotation_keys,
        };
        // Judged as if built by hand; the file's claim slot must then say
        // what hemem decided, or the file was edited.
        let params = Parameters::new(spec, check)?;
        if claim != params.preset_claim() {
            return Err(invalid("claimed_security_bits"));
        }
        if params.fingerprint() != header.fingerprint {
            return Err(SerializationError::FingerprintMismatch {
                stated: header.fingerprint,
                computed: params.fingerprint(),
            }
            .into());
        }
        Ok(params)
    }

    /// [`Parameters::load`] from a file.
    ///
    /// # Errors
    /// As [`Parameters::load`].
    pub fn load_from_path(path: impl AsRef<Path>, check: SecurityCheck) -> Result<Self> {
        Self::load(open_file(path.as_ref())?, check)
    }

    /// [`Parameters::load`] from bytes.
    ///
    /// # Errors
    /// As [`Parameters::load`].
    pub fn from_bytes(bytes: &[u8], check: SecurityCheck) -> Result<Self> {
        Self::load(bytes, check)
    }
}

impl Save for Parameters {
    /// Writes the parameters' description (every field of their spec, and
    /// the security-claim slot); the primes are rebuilt on loading.
    fn save<W: Write>(&self, w: W) -> Result<()> {
        let mut w = Writer::new(w, Kind::Parameters, self.fingerprint())?;
        self.write_body(&mut w)?;
        w.finish()?;
        Ok(())
    }
}
