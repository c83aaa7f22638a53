//! The workloads the benchmark commands run: a preset's bootstrapping set
//! up from scratch (keys, diagonals, an input levelled down to 3), the
//! encrypted-inference network ([`InferenceWorkload`]), and random inputs.

use std::sync::Arc;
use std::time::Instant;

use hemem_bootstrap::linear_transform::DiagonalStorage;
use hemem_bootstrap::schedule::BootstrapSchedule;
use hemem_bootstrap::{BootstrapKeys, Bootstrapper};
use hemem_ckks::prelude::*;
use hemem_ckks::sampling::Sampler;
use num_complex::Complex64;

use crate::Result;
use crate::inference::{EncryptedNetwork, Network, NetworkShape, WeightResidency, random_image};

/// Random real values in [−1, 1), one per slot, as slot values.
pub fn random_reals(sampler: &mut Sampler, slots: usize) -> Vec<Complex64> {
    (0..slots)
        .map(|_| Complex64::new(2.0 * sampler.uniform_f64() - 1.0, 0.0))
        .collect()
}

/// A fresh public-key encryption of random reals at the encryption level.
///
/// # Errors
/// Encoding and encryption errors.
pub fn random_ciphertext(
    context: &Context,
    public: &PublicKey,
    sampler: &mut Sampler,
) -> Result<(Vec<Complex64>, Ciphertext)> {
    let params = context.params();
    let enc = params.enc_level();
    let values = random_reals(sampler, params.slots());
    let pt = Encoder::new(context).encode_at(
        &values,
        enc,
        params.default_scale(enc)?,
        params.slots(),
    )?;
    Ok((values, Encryptor::new(context)?.encrypt(&pt, public)?))
}

/// One preset's bootstrapping, ready to run: keys generated, CoeffToSlot's
/// diagonals encoded, SlotToCoeff prepared for the input's scale, and an
/// input (random reals, encrypted at the encryption level and levelled down
/// to 3) as `hemem bootstrap` makes it.
#[derive(Debug)]
pub struct BootstrapWorkload {
    /// The secret key (to check results).
    pub secret: SecretKey,
    /// The public key.
    pub public: PublicKey,
    /// The bootstrapper, holding the keys and diagonals.
    pub bootstrapper: Bootstrapper,
    /// The key set (relinearisation, conjugation, rotations).
    pub key_set: Arc<KeySet>,
    /// Switching keys generated.
    pub keys: usize,
    /// Their bytes.
    pub key_set_bytes: usize,
    /// The input's slot values.
    pub values: Vec<Complex64>,
    /// The input, at level 3.
    pub input: Ciphertext,
    /// Milliseconds to generate the keys and encode the diagonals.
    pub setup_ms: f64,
}

impl BootstrapWorkload {
    /// Sets up the recommended bootstrapping of `context`'s parameters
    /// ([`BootstrapSchedule::recommended_for_slots`]: the preset is found by
    /// the parameters' structure) at all slots unless `slots` says
    /// otherwise, diagonals stored as `storage`.
    ///
    /// # Errors
    /// [`hemem_bootstrap::Error::NotBootstrappable`]; key generation,
    /// encoding and memory errors (an `OverBudget` among them).
    pub fn generate(
        context: &Context,
        slots: Option<usize>,
        storage: DiagonalStorage,
        sampler: &mut Sampler,
    ) -> Result<Self> {
        let params = context.params();
        let schedule = BootstrapSchedule::recommended_for_slots(
            params,
            slots.unwrap_or_else(|| params.slots()),
        )?;
        let started = Instant::now();
        let keygen = KeyGenerator::new(context)?;
        let secret = keygen.secret_key()?;
        let public = keygen.public_key(&secret)?;
        let keys = BootstrapKeys::generate(&keygen, &secret, &schedule)?;
        let count = keys.len();
        let bootstrapper = Bootstrapper::with_storage(context, schedule, keys, storage)?;
        // Taken after the bootstrapper, so that `DiagonalStorage::Fit` may
        // store key halves.
        let key_set = Arc::clone(bootstrapper.key_set());
        let bytes = bootstrapper.key_bytes();
        let enc = params.enc_level();
        bootstrapper.prepare_for_scale(params.default_scale(enc)?)?;
        context.synchronize()?;
        let setup_ms = started.elapsed().as_secs_f64() * 1e3;
        let slots = bootstrapper.schedule().slots();
        let values = random_reals(sampler, slots);
        let pt =
            Encoder::new(context).encode_at(&values, enc, params.default_scale(enc)?, slots)?;
        let ct = Encryptor::new(context)?.encrypt(&pt, &public)?;
        let input = Evaluator::new(context).level_down(&ct, Level(3))?;
        Ok(Self {
            secret,
            public,
            bootstrapper,
            key_set,
            keys: count,
            key_set_bytes: bytes,
            values,
            input,
            setup_ms,
        })
    }

    /// The largest real-part error of `output` against the input's values.
    ///
    /// # Errors
    /// Decryption and decoding errors.
    pub fn max_error(&self, context: &Context, output: &Ciphertext) -> Result<f64> {
        let decrypted = Decryptor::new(context).decrypt(output, &self.secret)?;
        let got = Encoder::new(context).decode(&decrypted)?;
        Ok(got
            .iter()
            .zip(&self.values)
            .map(|(a, b)| (a.re - b.re).abs())
            .fold(0.0, f64::max))
    }
}

/// The encrypted-inference workload ([`crate::inference`]) ready to run:
/// a network of ResNet-20's shape with random weights, its keys and
/// encoded weights, and one random image encrypted at the encryption level.
#[derive(Debug)]
pub struct InferenceWorkload {
    /// The secret key (to check results).
    pub secret: SecretKey,
    /// The public key.
    pub public: PublicKey,
    /// The network, its keys, weights and bootstrapper.
    pub network: EncryptedNetwork,
    /// The image's pixels.
    pub image: Vec<f64>,
    /// Its logits in f64.
    pub expected: Vec<f64>,
    /// The encrypted image.
    pub input: Ciphertext,
    /// Milliseconds to generate the keys and encode the weights.
    pub setup_ms: f64,
}

impl InferenceWorkload {
    /// The seed of the weights the benchmarks use (the image's is the next).
    pub const SEED: u64 = 20;

    /// Sets up `shape` on `context` with weights from [`Self::SEED`],
    /// diagonals stored as `storage`.
    ///
    /// # Errors
    /// As [`EncryptedNetwork::generate_with_storage`].
    pub fn generate(
        context: &Context,
        shape: &NetworkShape,
        storage: DiagonalStorage,
    ) -> Result<Self> {
        Self::generate_with_residency(context, shape, storage, WeightResidency::Resident)
    }

    /// As [`InferenceWorkload::generate`], the weights kept as `residency`
    /// says ([`WeightResidency::Swapped`]: the sweep's `manual-swap`).
    ///
    /// # Errors
    /// As [`EncryptedNetwork::generate_with_residency`].
    pub fn generate_with_residency(
        context: &Context,
        shape: &NetworkShape,
        storage: DiagonalStorage,
        residency: WeightResidency,
    ) -> Result<Self> {
        let network = Network::random(shape, Self::SEED)?;
        let started = Instant::now();
        let keygen = KeyGenerator::new(context)?;
        let secret = keygen.secret_key()?;
        let public = keygen.public_key(&secret)?;
        let network = EncryptedNetwork::generate_with_residency(
            context, &network, &keygen, &secret, storage, residency,
        )?;
        let setup_ms = started.elapsed().as_secs_f64() * 1e3;
        let image = random_image(shape, Self::SEED + 1)?;
        let expected = network.network().infer_plain(&image)?;
        let input = network.encrypt(&image, &public)?;
        Ok(Self {
            secret,
            public,
            network,
            image,
            expected,
            input,
            setup_ms,
        })
    }

    /// The largest logit error of `output` against f64.
    ///
    /// # Errors
    /// Decryption and decoding errors.
    pub fn max_error(&self, output: &Ciphertext) -> Result<f64> {
        let got = self.network.decrypt_logits(output, &self.secret)?;
        Ok(got
            .iter()
            .zip(&self.expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max))
    }
}
