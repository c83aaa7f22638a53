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
use std::path::Path;
use std::sync::Arc;

use hemem_ckks::keys::{KeyKind, SwitchingKey};
use hemem_ckks::serialize::{FileMode, Kind, Reader, Writer, open_file, write_file};
use hemem_ckks::{Context, SerializationError};

use crate::Result;
use crate::bootstrapper::{BootstrapKeys, SseKeys};

fn invalid(field: &'static str) -> crate::Error {
    hemem_ckks::Error::from(SerializationError::InvalidField { field }).into()
}

impl BootstrapKeys {
    /// Every switching key, SSE keys last.
    fn all_keys(&self) -> impl Iterator<Item = &SwitchingKey> {
        self.keys
            .keys()
            .chain(self.sse.iter().flat_map(|s| [&s.to_sparse, &s.to_dense]))
    }

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
    /// # Errors
    /// [`SerializationError::InvalidField`] (`"key count"`) for an empty
    /// key set; [`SerializationError::ParameterMismatch`] for keys of mixed
    /// parameters; transfer errors; [`SerializationError::Io`].
    pub fn save<W: Write>(&self, w: W) -> Result<()> {
        Ok(self.write_to(w)?)
    }

    fn write_to<W: Write>(&self, w: W) -> hemem_ckks::Result<()> {
        let fingerprint = self
            .all_keys()
            .next()
            .map(|k| k.context().params().fingerprint())
            .ok_or(SerializationError::InvalidField { field: "key count" })?;
        if let Some(found) = self
            .all_keys()
            .map(|k| k.context().params().fingerprint())
            .find(|&f| f != fingerprint)
        {
            return Err(SerializationError::ParameterMismatch {
                expected: fingerprint,
                found,
            }
            .into());
        }
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

    /// [`BootstrapKeys::save`] to a file (written under a temporary name
    /// and renamed into place; public material, the default mode).
    ///
    /// # Errors
    /// As [`BootstrapKeys::save`].
    pub fn save_to_path(&self, path: impl AsRef<Path>) -> Result<()> {
        Ok(write_file(path.as_ref(), FileMode::Shared, |f| {
            self.write_to(f)
        })?)
    }

    /// Loads keys saved by [`BootstrapKeys::save`] into `context` (on its
    /// device), one polynomial at a time straight into its destination.
    ///
    /// # Errors
    /// [`SerializationError`] (through [`crate::Error::Ckks`]): data of
    /// other parameters, another kind or format version, truncated or
    /// corrupted data, any field out of place; allocation and transfer
    /// errors.
    pub fn load<R: Read>(context: &Context, r: R) -> Result<Self> {
        let (header, mut r) = Reader::open(r, Kind::BootstrapKeys)?;
        let expected = context.params().fingerprint();
        if header.fingerprint != expected {
            return Err(
                hemem_ckks::Error::from(SerializationError::ParameterMismatch {
                    expected,
                    found: header.fingerprint,
                })
                .into(),
            );
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

    /// [`BootstrapKeys::load`] from a file.
    ///
    /// # Errors
    /// As [`BootstrapKeys::load`].
    pub fn load_from_path(context: &Context, path: impl AsRef<Path>) -> Result<Self> {
        Self::load(context, open_file(path.as_ref())?)
    }

    /// Whether the sparse-secret encapsulation keys are present.
    pub fn has_sse_keys(&self) -> bool {
        self.sse.is_some()
    }
}
