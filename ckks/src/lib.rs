//! CKKS for hemem: parameters and the HEaaN presets, 64-bit modular and RNS
//! arithmetic, the negacyclic NTT, the canonical-embedding encoder, keys,
//! encryption and decryption, the evaluator, and the [`backend::Backend`]
//! seam that the CPU and GPU implement.
//!
//! ```
//! use hemem_ckks::prelude::*;
//! use num_complex::Complex64;
//!
//! # fn main() -> hemem_ckks::Result<()> {
//! // A small insecure test preset keeps the example fast.
//! let params = Parameters::from_preset_with(Preset::TestFTb, SecurityCheck::AllowInsecure)?;
//! let context = Context::new(params, DeviceSelection::Cpu)?;
//! let keygen = KeyGenerator::new(&context)?;
//! let secret = keygen.secret_key()?;
//! let public = keygen.public_key(&secret)?;
//! let encoder = Encoder::new(&context);
//! let values = vec![Complex64::new(0.25, -0.5); 8];
//! let ct = Encryptor::new(&context)?.encrypt(&encoder.encode(&values)?, &public)?;
//! let sum = Evaluator::new(&context).add(&ct, &ct)?;
//! let out = encoder.decode(&Decryptor::new(&context).decrypt(&sum, &secret)?)?;
//! assert!((out[0] - Complex64::new(0.5, -1.0)).norm() < 1e-6);
//! # Ok(())
//! # }
//! ```

pub mod backend;
mod context;
pub mod encoding;
mod error;
pub mod eval;
pub mod keys;
pub mod ntt;
pub mod params;
pub mod poly;
pub mod progress;
pub mod rns;
pub mod sampling;
pub mod serialize;
#[cfg(any(test, feature = "test-utils"))]
pub mod testing;
pub mod zq;

pub use context::Context;
pub use error::{Error, KeyError, OperandError, ParametersError, Result, SerializationError};

/// The types most programs need: context and memory settings, encoding,
/// keys, encryption and evaluation, noise flooding, and the serialization
/// traits (objects move between contexts only as bytes).
pub mod prelude {
    pub use crate::Context;
    pub use crate::backend::{Device, DeviceSelection};
    pub use crate::encoding::{Encoder, Plaintext};
    pub use crate::eval::{
        Ciphertext, Decryptor, Encryptor, Evaluator, FloodingGoal, NoiseFlooding,
    };
    pub use crate::keys::{
        KeyGenerator, KeySet, KeySetRequest, PublicKey, SecretKey, SwitchingKey,
    };
    pub use crate::params::{Level, Parameters, Preset, Scale, SecurityCheck};
    pub use crate::serialize::{FromBytes, Load, Save, ToBytes};
    pub use hemem_memory::MemoryConfig;
}
