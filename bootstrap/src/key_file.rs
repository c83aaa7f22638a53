//! Bootstrap key files: [`BootstrapKeys`] saved to any [`Write`] and loaded
//! from any [`Read`], one polynomial at a time, in compact form.
//!
//! The file is a hemem object of kind [`Kind::BootstrapKeys`] (layout in
//! [`hemem_ckks::serialize`]) whose payload is:
//!
//! | field | |
//! |---|---|
//! | u8 | 1 when the sparse-secret encapsulation keys follow, else 0 |
//! | key set | the key count (u32), then each switching key's record (relinearisation, conjugation, rotations by Galois element) |
//! | SSE keys | dense → sparse, then sparse → dense (generic switching keys) |
//!
//! Every switching key is stored compact (`b` and its 32-byte seed, at its
//! level), so a file holds about half the bytes of expanded keys. Loading
//! checks the parameter fingerprint against the context, every count,
//! kind, level, Galois element, modulus and residue, the checksums, the end
//! marker and that nothing follows; each polynomial goes straight into its
//! destination on the context's device.

use std::io::{Read, Write};
use std::sync::Arc;

use hemem_ckks::keys::{KeyKind, SwitchingKey};
use hemem_ckks::serialize::{Kind, Load, Reader, Save, Writer, keys_fingerprint};
use hemem_ckks::{Context, SerializationError};

use crate::bootstrapper::{BootstrapKeys, SseKeys};

fn invalid(field: &'static str) -> hemem_ckks::Error {
    SerializationError::InvalidField { field }.into()
}

impl BootstrapKeys {
    /// Every switching key, SSE keys last.
    fn all_keys(&self) -> impl Iterator<Item = &SwitchingKey> {
        self.keys
            .keys()
            .chain(self.sse.iter().flat_map(|s| [&s.to_sparse, &s.to_dense]))
    }
}

/// Bootstrap keys save and load through hemem-ckks's [`Save`] and [`Load`]
/// like every other object (`save`, `save_to_path`, `to_bytes`; `load`,
/// `load_from_path`, `from_bytes`): see [`hemem_ckks::serialize`]. The
/// errors are [`hemem_ckks::Error`]s, which convert into [`crate::Error`]
/// and `hemem::Error` with `?`.
impl Save for BootstrapKeys {
    /// Writes the keys to `w`: one polynomial at a time, downloaded a few
    /// limbs at a time when the keys live on a GPU; nothing the size of a
    /// key is copied.
    ///
    /// The file is a hemem object of kind
    /// [`Kind::BootstrapKeys`] (header, checksummed frames, end marker: see
    /// [`hemem_ckks::serialize`]) whose payload is a byte (1 when the
    /// sparse-secret encapsulation keys follow), the key set's record (key
    /// count, then each switching key's record), and the two SSE keys'
    /// records (dense → sparse, sparse → dense). Every key is compact: `b`
    /// and its seed, at its level.
    ///
    /// Its errors are [`Save`]'s, with [`SerializationError::InvalidField`]
    /// (`"key count"`) when there is no key at all and
    /// [`SerializationError::ParameterMismatch`] for keys of mixed
    /// parameters ([`keys_fingerprint`]).
    fn save<W: Write>(&self, w: W) -> hemem_ckks::Result<()> {
        let fingerprint = keys_fingerprint(self.all_keys())?;
        let mut w = Writer::new(w, Kind::BootstrapKeys, fingerprint)?;
        w.u8(u8::from(self.sse.is_some()))?;
        w.key_set(&self.keys)?;
        if let Some(sse) = &self.sse {
            w.switching_key(&sse.to_sparse)?;
            w.switching_key(&sse.to_dense)?;
        }
        w.finish()?;
        Ok(())
    }
}

impl Load for BootstrapKeys {
    /// Loads keys saved by [`Save::save`] into `context` (on its device),
    /// one polynomial at a time straight into its destination. Its errors
    /// are [`Load`]'s: data of other parameters, another kind or format
    /// version, truncated or corrupted data, any field out of place;
    /// allocation and transfer errors.
    fn load<R: Read>(context: &Context, r: R) -> hemem_ckks::Result<Self> {
        let (header, mut r) = Reader::open(r, Kind::BootstrapKeys)?;
        let expected = context.params().fingerprint();
        if header.fingerprint != expected {
            return Err(SerializationError::ParameterMismatch {
                expected,
                found: header.fingerprint,
            }
            .into());
        }
        let has_sse = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(invalid("sse flag")),
        };
        let keys = r.key_set(context)?;
        let sse = if has_sse {
            let to_sparse = r.switching_key(context)?;
            let to_dense = r.switching_key(context)?;
            if to_sparse.kind() != KeyKind::Generic || to_dense.kind() != KeyKind::Generic {
                return Err(invalid("sse key kind"));
            }
            Some(SseKeys {
                to_sparse,
                to_dense,
            })
        } else {
            None
        };
        r.finish()?;
        Ok(Self {
            keys: Arc::new(keys),
            sse,
        })
    }
}

impl BootstrapKeys {
    /// Whether the sparse-secret encapsulation keys are present.
    pub fn has_sse_keys(&self) -> bool {
        self.sse.is_some()
    }
}
