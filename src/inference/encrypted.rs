//! [`EncryptedNetwork`]: a [`Network`] evaluated on CKKS ciphertexts over
//! hemem's public API: its layers encoded as BSGS linear transforms
//! ([`hemem_bootstrap::linear_transform`]) at the levels the [`Plan`]
//! gives them, the activation through [`hemem_bootstrap::poly_eval`], and a
//! [`Bootstrapper`] where levels run out.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use hemem_bootstrap::linear_transform::{DiagonalStorage, EncodedLinearTransform, LinearTransform};
use hemem_bootstrap::poly_eval;
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, Bootstrapper, CkksOps};
use hemem_ckks::encoding::CompactPlaintext;
use hemem_ckks::keys::KeyKind;
use hemem_ckks::ntt::GaloisElement;
use hemem_ckks::prelude::*;
use hemem_memory::MemoryClass;
use num_complex::Complex64;

use super::layout::SlotLayout;
use super::network::Network;
use super::schedule::{Engine, Layer, Levels, Plan, Planner, forward};
use crate::{Error, Result};

type Transform = EncodedLinearTransform<Plaintext, CompactPlaintext>;

/// Where an [`EncryptedNetwork`] keeps its encoded weights (the layers'
/// diagonals) between the layers that use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightResidency {
    /// In the context's memory for the network's life: the memory policy
    /// alone decides where they are (pooled under `device`, managed under
    /// `static`, streamed from pinned host masters under `planned`).
    #[default]
    Resident,
    /// A hand-written swap, the baseline the hybrid-UM paper's `profiled`
    /// scheme is measured against on its ResNet (Choi et al., §IV: "manual
    /// swap, where the programmer is responsible for swapping out GPU
    /// objects into host memory manually"): every layer's diagonals live in
    /// host memory; just before a layer runs they are copied to the device
    /// (one synchronous copy per diagonal, nothing overlapped) and the copy
    /// is dropped as soon as the layer is done. The keys and the
    /// bootstrapper stay where the memory policy puts them. The arithmetic
    /// is the same word for word: only where the diagonals wait changes.
    Swapped,
}

/// A network ready to run on ciphertexts of one context: its plan, its
/// keys (the network's rotations and, where the plan bootstraps, the
/// bootstrapping keys, in one key set), its weights encoded as
/// `Plaintext` memory (compact diagonals by default: one word per
/// coefficient, expanded when a layer runs) and its bootstrapper.
pub struct EncryptedNetwork {
    context: Context,
    network: Network,
    layout: SlotLayout,
    levels: Levels,
    plan: Plan,
    evaluator: Evaluator,
    bootstrapper: Option<Bootstrapper>,
    transforms: BTreeMap<Layer, Transform>,
    pool_steps: Vec<i64>,
    residency: WeightResidency,
    keys: usize,
    key_bytes: usize,
}

impl std::fmt::Debug for EncryptedNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptedNetwork")
            .field("parameters", &self.context.params().name())
            .field("shape", self.network.shape())
            .field("plan", &self.plan)
            .field("residency", &self.residency)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

impl EncryptedNetwork {
    /// Plans `network` on `context`'s parameters, generates the keys it
    /// needs for `secret` and encodes its weights, the diagonals kept
    /// compact.
    ///
    /// # Errors
    /// As [`EncryptedNetwork::generate_with_storage`].
    pub fn generate(
        context: &Context,
        network: &Network,
        keygen: &KeyGenerator,
        secret: &SecretKey,
    ) -> Result<Self> {
        Self::generate_with_storage(context, network, keygen, secret, DiagonalStorage::Compact)
    }

    /// As [`EncryptedNetwork::generate`], keeping the weights' and the
    /// bootstrapper's diagonals as `storage` says. The weights are kept
    /// encoded with [`DiagonalStorage::Encoded`] and compact otherwise
    /// (`Mixed` and `Fit` are the bootstrapper's: `Fit` sizes its choice
    /// before the weights exist, so under the `device` policy and a budget
    /// prefer `Compact`).
    ///
    /// # Errors
    /// As [`EncryptedNetwork::generate_with_residency`].
    pub fn generate_with_storage(
        context: &Context,
        network: &Network,
        keygen: &KeyGenerator,
        secret: &SecretKey,
        storage: DiagonalStorage,
    ) -> Result<Self> {
        Self::generate_with_residency(
            context,
            network,
            keygen,
            secret,
            storage,
            WeightResidency::Resident,
        )
    }

    /// As [`EncryptedNetwork::generate_with_storage`], keeping the weights
    /// as `residency` says. With [`WeightResidency::Swapped`] each layer's
    /// diagonals go to host memory as soon as they are encoded, so the
    /// device never holds more than one layer's.
    ///
    /// # Errors
    /// [`Error::InvalidNetwork`] when the shape does not fit the slots;
    /// [`Error::NotEnoughLevels`] when a layer cannot get its levels (too
    /// few between bootstraps, or parameters that do not bootstrap);
    /// key-generation, encoding, transfer and memory errors (an
    /// `OverBudget` among them).
    pub fn generate_with_residency(
        context: &Context,
        network: &Network,
        keygen: &KeyGenerator,
        secret: &SecretKey,
        storage: DiagonalStorage,
        residency: WeightResidency,
    ) -> Result<Self> {
        let params = context.params();
        let layout = SlotLayout::new(network.shape(), params.slots())?;
        let levels = Levels {
            post: params.post_bootstrap_level().map(|l| l.get()),
            activation: network.activation().depth(),
        };
        let enc = params.enc_level().get();
        let plan = Planner::plan(network, levels, enc)?;
        let matrices = linear_layers(network, &layout, &plan)?;
        let pool_steps = layout.pool_steps();
        let request = key_request(params, &plan, &matrices, &pool_steps);
        let (key_set, bootstrapper) = if plan.bootstrap_calls == 0 {
            (Arc::new(keygen.key_set(secret, &request)?), None)
        } else {
            let schedule = BootstrapSchedule::recommended(params)?;
            let keys = BootstrapKeys::generate_with(keygen, secret, &schedule, &request)?;
            let key_set = Arc::clone(keys.key_set());
            let bootstrapper = Bootstrapper::with_storage(context, schedule, keys, storage)?;
            // SlotToCoeff absorbs the input scale: encode its diagonals for
            // the planned inputs now, not in the first inference.
            let scales: BTreeSet<usize> = plan.bootstrap_inputs.iter().copied().collect();
            for level in scales.into_iter().rev().take(2) {
                bootstrapper.prepare_for_scale(params.default_scale(Level(level))?)?;
            }
            (key_set, Some(bootstrapper))
        };
        let keys = key_set.len();
        let key_bytes = key_set.size_bytes();
        let evaluator = Evaluator::with_keys(context, key_set);
        // The layers' diagonals are read-only for the network's life, like
        // bootstrapping's: in that class the `planned` policy keeps pinned
        // host masters and streams them under a budget instead of pooling
        // them (1.4 GB for FGb's network, more than a 2 GiB card leaves).
        let ops = CkksOps::new(&evaluator).with_constant_class(MemoryClass::BootstrapConstant);
        let weight_storage = match storage {
            DiagonalStorage::Encoded => DiagonalStorage::Encoded,
            _ => DiagonalStorage::Compact,
        };
        let transforms = matrices
            .into_iter()
            .map(|(layer, (level, transform))| {
                let scale = LinearTransform::diagonal_scale(
                    params.default_scale(Level(level))?.get(),
                    params.default_scale(Level(level - 1))?.get(),
                    params.q_modulus(Level(level))?.value(),
                );
                let encoded = transform.encode_with(&ops, level, scale, weight_storage)?;
                let encoded = match residency {
                    WeightResidency::Resident => encoded,
                    // The device copy is dropped here, before the next
                    // layer is encoded.
                    WeightResidency::Swapped => encoded.to_host()?,
                };
                Ok((layer, encoded))
            })
            .collect::<Result<_>>()?;
        context.synchronize()?;
        Ok(Self {
            context: context.clone(),
            network: network.clone(),
            layout,
            levels,
            plan,
            evaluator,
            bootstrapper,
            transforms,
            pool_steps,
            residency,
            keys,
            key_bytes,
        })
    }

    /// Where the weights wait between layers.
    pub fn residency(&self) -> WeightResidency {
        self.residency
    }

    /// The same network (the same keys and weights, word for word) with
    /// its weights kept as `residency` says: to the host for
    /// [`WeightResidency::Swapped`], back to the device for
    /// [`WeightResidency::Resident`], one layer at a time; nothing moves
    /// when it is already so.
    ///
    /// # Errors
    /// Transfer and memory errors (an `OverBudget` among them).
    pub fn with_residency(mut self, residency: WeightResidency) -> Result<Self> {
        if residency == self.residency {
            return Ok(self);
        }
        for transform in self.transforms.values_mut() {
            let moved = match residency {
                WeightResidency::Resident => transform.to_device()?,
                WeightResidency::Swapped => transform.to_host()?,
            };
            *transform = moved;
        }
        self.context.synchronize()?;
        self.residency = residency;
        Ok(self)
    }

    /// The plan: each layer's level and the bootstraps.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The network.
    pub fn network(&self) -> &Network {
        &self.network
    }

    /// Switching keys held (the bootstrapping keys included; the sparse-secret
    /// encapsulation keys are not counted).
    pub fn key_count(&self) -> usize {
        self.keys
    }

    /// Bytes of those keys.
    pub fn key_bytes(&self) -> usize {
        self.key_bytes
    }

    /// Bytes of the encoded weights, as stored.
    pub fn weight_bytes(&self) -> usize {
        self.transforms.values().map(Transform::size_bytes).sum()
    }

    /// The most bytes of weights one layer holds: what
    /// [`WeightResidency::Swapped`] copies to the device at once.
    pub fn largest_layer_bytes(&self) -> usize {
        self.transforms
            .values()
            .map(Transform::size_bytes)
            .max()
            .unwrap_or(0)
    }

    /// `image` (row-major, `image_size²` pixels in `[−1, 1]`) packed and
    /// encrypted with `public` at the encryption level.
    ///
    /// # Errors
    /// [`Error::ImageSize`], [`Error::ImagePixel`]; encoding and encryption
    /// errors.
    pub fn encrypt(&self, image: &[f64], public: &PublicKey) -> Result<Ciphertext> {
        self.network.check_image(image)?;
        let params = self.context.params();
        let enc = params.enc_level();
        let pt = Encoder::new(&self.context).encode_at(
            &self.layout.pack_image(image),
            enc,
            params.default_scale(enc)?,
            params.slots(),
        )?;
        Ok(Encryptor::new(&self.context)?.encrypt(&pt, public)?)
    }

    /// Runs the network on an encrypted image ([`EncryptedNetwork::encrypt`]).
    /// Logit `j` ends in slot [`SlotLayout::logit_slot`]`(j)`; read them
    /// with [`EncryptedNetwork::decrypt_logits`].
    ///
    /// # Errors
    /// [`Error::InputShape`] for an input not at the encryption level and
    /// default scale with all slots; evaluation, bootstrapping and memory
    /// errors.
    pub fn infer(&self, input: &Ciphertext) -> Result<Ciphertext> {
        let params = self.context.params();
        let enc = params.enc_level();
        if input.level() != enc
            || input.slots() != params.slots()
            || !input.scale().matches(params.default_scale(enc)?)
        {
            return Err(Error::InputShape {
                level: enc.get(),
                slots: params.slots(),
            });
        }
        let input = input.try_clone()?;
        forward(self, &self.network, &self.levels, input)
    }

    /// The logits in an output of [`EncryptedNetwork::infer`].
    ///
    /// # Errors
    /// Decryption and decoding errors.
    pub fn decrypt_logits(&self, output: &Ciphertext, secret: &SecretKey) -> Result<Vec<f64>> {
        let pt = Decryptor::new(&self.context).decrypt(output, secret)?;
        let slots = Encoder::new(&self.context).decode(&pt)?;
        Ok((0..self.network.shape().classes)
            .map(|j| slots.get(self.layout.logit_slot(j)).map_or(0.0, |z| z.re))
            .collect())
    }

    fn ops(&self) -> CkksOps<'_> {
        CkksOps::new(&self.evaluator).with_constant_class(MemoryClass::Plaintext)
    }
}

impl Engine for EncryptedNetwork {
    type Value = Ciphertext;

    fn level(&self, x: &Ciphertext) -> usize {
        x.level().get()
    }

    fn linear(&self, layer: Layer, x: &Ciphertext) -> Result<Ciphertext> {
        let transform = self.transforms.get(&layer).ok_or(Error::InvalidNetwork {
            reason: "a layer the plan did not encode",
        })?;
        if transform.level() != x.level().get() {
            return Err(Error::InvalidNetwork {
                reason: "a layer's input is not at its planned level",
            });
        }
        match self.residency {
            WeightResidency::Resident => Ok(transform.evaluate(&self.ops(), x)?),
            WeightResidency::Swapped => {
                // Brought in just before the layer, dropped right after it.
                let on_device = transform.to_device()?;
                let y = on_device.evaluate(&self.ops(), x)?;
                drop(on_device);
                Ok(y)
            }
        }
    }

    fn activate(&self, x: &Ciphertext) -> Result<Ciphertext> {
        let poly = self.network.activation();
        let target = x
            .level()
            .get()
            .checked_sub(poly.depth())
            .ok_or(Error::InvalidNetwork {
                reason: "an activation without its levels",
            })?;
        let scale = self.context.params().default_scale(Level(target))?;
        Ok(poly_eval::evaluate(&self.ops(), x, poly, scale.get())?)
    }

    fn bootstrap(&self, xs: Vec<Ciphertext>) -> Result<Vec<Ciphertext>> {
        let bootstrapper = self.bootstrapper.as_ref().ok_or(Error::InvalidNetwork {
            reason: "the plan has no bootstraps",
        })?;
        Ok(match xs.as_slice() {
            [x] => vec![bootstrapper.bootstrap_real(x)?],
            _ => bootstrapper.bootstrap_real_many(&xs)?,
        })
    }

    fn add(&self, a: Ciphertext, b: Ciphertext) -> Result<Ciphertext> {
        let (mut low, high) = if a.level() <= b.level() {
            (a, b)
        } else {
            (b, a)
        };
        let high = if high.level() == low.level() {
            high
        } else {
            // One level above the meeting point, then ×1 with its rescale:
            // exactly the lower level's default scale.
            let above = self
                .evaluator
                .level_down(&high, Level(low.level().get() + 1))?;
            self.evaluator
                .mult_const(&above, Complex64::new(1.0, 0.0))?
        };
        self.evaluator.add_assign(&mut low, &high)?;
        Ok(low)
    }

    fn pool(&self, x: &Ciphertext) -> Result<Ciphertext> {
        let mut acc = x.try_clone()?;
        for &step in &self.pool_steps {
            let rotated = self.evaluator.rotate(&acc, step)?;
            self.evaluator.add_assign(&mut acc, &rotated)?;
        }
        Ok(acc)
    }
}

/// Every linear layer as a transform, with the level the plan runs it at.
fn linear_layers(
    network: &Network,
    layout: &SlotLayout,
    plan: &Plan,
) -> Result<BTreeMap<Layer, (usize, LinearTransform)>> {
    let level = |layer: Layer| -> Result<usize> {
        plan.layers
            .get(&layer)
            .copied()
            .ok_or(Error::InvalidNetwork {
                reason: "a layer the plan never reached",
            })
    };
    let mut out = BTreeMap::new();
    out.insert(
        Layer::Stem,
        (level(Layer::Stem)?, layout.convolution(network.stem(), 1)?),
    );
    for (b, block) in network.blocks().iter().enumerate() {
        // The stride of the layout the block's input is in.
        let t = 1
            << block
                .stage
                .saturating_sub(usize::from(block.shortcut.is_some()));
        let t_mid = t * block.conv1.stride;
        out.insert(
            Layer::Conv1(b),
            (
                level(Layer::Conv1(b))?,
                layout.convolution(&block.conv1, t)?,
            ),
        );
        out.insert(
            Layer::Conv2(b),
            (
                level(Layer::Conv2(b))?,
                layout.convolution(&block.conv2, t_mid)?,
            ),
        );
        if let Some(conv) = &block.shortcut {
            out.insert(
                Layer::Shortcut(b),
                (level(Layer::Shortcut(b))?, layout.convolution(conv, t)?),
            );
        }
    }
    out.insert(Layer::Fc, (level(Layer::Fc)?, layout.fc(network)?));
    Ok(out)
}

/// The network's keys: relinearisation for its highest activation, each
/// rotation for the highest level it is used at.
fn key_request(
    params: &Parameters,
    plan: &Plan,
    layers: &BTreeMap<Layer, (usize, LinearTransform)>,
    pool_steps: &[i64],
) -> KeySetRequest {
    let n = params.degree().get();
    let mut rotations: BTreeMap<i64, usize> = BTreeMap::new();
    let mut need = |step: i64, level: usize| {
        let entry = rotations.entry(step).or_insert(level);
        *entry = (*entry).max(level);
    };
    for (level, transform) in layers.values() {
        for step in transform.rotations() {
            need(step as i64, *level);
        }
    }
    for &step in pool_steps {
        need(step, plan.pool_level);
    }
    let mut levels: BTreeMap<KeyKind, Level> = rotations
        .iter()
        .map(|(&step, &level)| {
            (
                KeyKind::Rotation(GaloisElement::rotation(step, n)),
                Level(level),
            )
        })
        .collect();
    levels.insert(KeyKind::Relinearization, Level(plan.top_activation));
    KeySetRequest {
        relinearization: true,
        conjugation: false,
        rotations: rotations.into_keys().collect(),
        levels,
    }
}
