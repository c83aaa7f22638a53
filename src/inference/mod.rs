//! Encrypted inference: a convolutional network of ResNet-20's shape on one
//! square, single-channel image, evaluated on CKKS ciphertexts and, for
//! reference, in f64.
//!
//! * [`network`] — the shape ([`NetworkShape`]), random weights
//!   ([`Network`]; no trained model is at hand, and the check against the
//!   same weights in f64 is what a benchmark and a test need), and the f64
//!   forward pass ([`Network::infer_plain`]).
//! * [`layout`] — the image and feature maps packed into slots, and each
//!   layer as a diagonal matrix: convolutions as hoisted baby-step
//!   rotations of the 3×3 offsets and Horner giant steps over the channels,
//!   pooling and the FC layer as one transform and a rotate-and-add.
//! * [`schedule`] — the forward pass written once over levels and
//!   ciphertexts: where each layer runs and where bootstrapping is needed.
//! * [`encrypted`] — [`EncryptedNetwork`]: the keys, the encoded weights,
//!   the bootstrapper, and inference on a ciphertext; the weights resident
//!   or swapped by hand between host and device layer by layer
//!   ([`WeightResidency`], the benchmarks' `manual-swap` baseline).
//!
//! ```no_run
//! use hemem::inference::{EncryptedNetwork, Network, NetworkShape, random_image};
//! use hemem::prelude::*;
//!
//! # fn main() -> hemem::Result<()> {
//! let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)?;
//! let context = Context::new(params, DeviceSelection::Cpu)?;
//! let shape = NetworkShape::resnet20_for_slots(context.params().slots());
//! let network = Network::random(&shape, 1)?;
//! let keygen = KeyGenerator::new(&context)?;
//! let secret = keygen.secret_key()?;
//! let public = keygen.public_key(&secret)?;
//! let encrypted = EncryptedNetwork::generate(&context, &network, &keygen, &secret)?;
//! let image = random_image(&shape, 2)?;
//! let output = encrypted.infer(&encrypted.encrypt(&image, &public)?)?;
//! let logits = encrypted.decrypt_logits(&output, &secret)?;
//! let expected = network.infer_plain(&image)?;
//! # let _ = (logits, expected);
//! # Ok(())
//! # }
//! ```

pub mod encrypted;
pub mod layout;
pub mod network;
pub mod schedule;

pub use encrypted::{EncryptedNetwork, WeightResidency};
pub use layout::SlotLayout;
pub use network::{Network, NetworkShape, random_image, relu_approximation};
pub use schedule::{Layer, MIN_LEVEL, Plan};
