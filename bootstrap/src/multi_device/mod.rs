//! [`MultiBootstrapper`]: one batch of ciphertexts bootstrapped across
//! several devices of one host, each device a [`Context`] with its own
//! memory system (budget and policy) and its own [`Bootstrapper`], one host
//! thread per device.
//!
//! # Keys reach every device once
//!
//! The bootstrapping keys are serialized once on the host, compact (`b`
//! and the seed of each key, as [`BootstrapKeys::save`] writes them), and
//! every device loads that one copy straight into its own memory; the
//! context the keys were made in, when it is one of the group's, keeps them
//! as they are. With [`MultiBootstrapper::from_key_file`] each device
//! streams the file instead, and the host holds no copy at all. Only the
//! `b` halves cross PCIe: each device regenerates the uniform halves from
//! their seeds, as its key switches run or, where its budget has room
//! ([`crate::linear_transform::DiagonalStorage::Fit`], the default), once
//! when its bootstrapper is made. Several contexts on one GPU each size
//! that choice by their own budget: give them budgets that add up to the
//! card (an `auto` budget is the whole free memory for each), or ask for
//! [`crate::linear_transform::DiagonalStorage::Compact`].
//!
//! Not done: the `b` halves are not broadcast device to device with NCCL
//! (cudarc's `nccl` feature): each device uploads them from the host. Under
//! the `planned` policy each device's memory system also keeps its own
//! pinned host master of the keys it streams (one per device); sharing one
//! pinned master between devices would need a portable pinned arena in
//! `hemem-memory`.
//!
//! # Results
//!
//! The outputs are the very ciphertexts [`Bootstrapper::bootstrap_many`]
//! gives on one device: every device holds the same keys, and the
//! backends are bit-identical, so where an input is bootstrapped does not
//! change a single limb. Every device evaluates the linear transforms with
//! the same [`BootstrapOptions`]; the forms its keys and diagonals are kept
//! in may differ with its budget, and every form gives the same words, so
//! that holds under any mix of budgets and policies.
//!
//! ```
//! use hemem_bootstrap::multi_device::{MultiBootstrapper, Split};
//! use hemem_bootstrap::schedule::BootstrapSchedule;
//! use hemem_bootstrap::{BootstrapKeys, BootstrapOptions};
//! use hemem_bootstrap::ckks::prelude::*;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)?;
//! // Two logical devices (here CPU contexts; GPUs are `DeviceSelection::Gpu(n)`),
//! // each with its own memory settings.
//! let contexts = [DeviceSelection::Cpu, DeviceSelection::Cpu]
//!     .into_iter()
//!     .map(|d| Context::with_memory(params.clone(), d, &MemoryConfig::default()))
//!     .collect::<Result<Vec<_>, _>>()?;
//! let keygen = KeyGenerator::new(&contexts[0])?;
//! let secret = keygen.secret_key()?;
//! let public = keygen.public_key(&secret)?;
//! let schedule = BootstrapSchedule::recommended_for_slots(&params, 8)?;
//! let keys = BootstrapKeys::generate(&keygen, &secret, &schedule)?;
//! let group = MultiBootstrapper::new(contexts.clone(), schedule, keys, BootstrapOptions::default())?
//!     .with_split(Split::Even)?;
//!
//! let encoder = Encoder::new(&contexts[0]);
//! let level = Level(3);
//! let inputs = (0..3)
//!     .map(|i| {
//!         let values = vec![num_complex::Complex64::new(0.1 * f64::from(i), 0.0); 8];
//!         let pt = encoder.encode_at(&values, level, params.default_scale(level)?, 8)?;
//!         Encryptor::new(&contexts[0])?.encrypt(&pt, &public)
//!     })
//!     .collect::<Result<Vec<_>, _>>()?;
//! let outputs = group.bootstrap_many(&inputs)?; // in input order, in contexts[0]
//! assert_eq!(outputs.len(), 3);
//! assert_eq!(group.bootstrapped_counts(), vec![2, 1]);
//! # Ok(())
//! # }
//! ```

mod split;

use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use hemem_ckks::Context;
use hemem_ckks::backend::Device;
use hemem_ckks::eval::Ciphertext;
use hemem_ckks::params::Scale;
use hemem_ckks::progress::{NoProgress, Progress};
use hemem_ckks::serialize::{FromBytes, Load, Save, ToBytes};
use hemem_memory::MemoryClass;

pub use split::Split;

use crate::schedule::BootstrapSchedule;
use crate::{BootstrapKeys, BootstrapOptions, Bootstrapper, DeviceFailure, Error, Result};

/// One device of the group.
struct Member {
    bootstrapper: Bootstrapper,
    context: Context,
    /// Inputs this device has bootstrapped.
    bootstrapped: AtomicU64,
}

/// Where the devices' keys come from.
enum KeySource<'a> {
    /// Keys made in one context: that context (when in the group) keeps
    /// them, the others load them serialized. Boxed: the other sources are
    /// two words.
    Keys(Box<BootstrapKeys>),
    /// [`BootstrapKeys::save`]'s bytes.
    Bytes(&'a [u8]),
    /// A key file each device streams.
    File(&'a Path),
}

/// What a device loads its keys from.
#[derive(Clone, Copy)]
enum KeyInput<'a> {
    Bytes(&'a [u8]),
    File(&'a Path),
}

/// Bootstraps batches across several devices of one host: see the
/// [module documentation](self).
///
/// `Send + Sync`; a batch runs on one scoped host thread per device that
/// has inputs, and [`MultiBootstrapper::bootstrap_many`] returns when all
/// of them are done.
pub struct MultiBootstrapper {
    members: Vec<Member>,
    schedule: BootstrapSchedule,
    split: Split,
}

impl std::fmt::Debug for MultiBootstrapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiBootstrapper")
            .field("devices", &self.devices())
            .field("split", &self.split)
            .finish_non_exhaustive()
    }
}

impl MultiBootstrapper {
    /// A group over `contexts` (one per device, each with its own memory
    /// configuration; two contexts on one GPU are two logical devices) with
    /// `schedule` and its `keys`: the keys are serialized once and loaded
    /// into every context but the one they were made in, which keeps them;
    /// then each device encodes its CoeffToSlot diagonals as
    /// [`Bootstrapper::with_options`] does, all devices at once.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for no context, or contexts of different
    /// parameters; serialization errors; [`Error::DeviceFailures`] naming
    /// each device whose keys or bootstrapper could not be set up (with no
    /// inputs), the cause inside.
    pub fn new(
        contexts: Vec<Context>,
        schedule: BootstrapSchedule,
        keys: BootstrapKeys,
        options: BootstrapOptions,
    ) -> Result<Self> {
        Self::build(contexts, schedule, KeySource::Keys(Box::new(keys)), options)
    }

    /// As [`MultiBootstrapper::new`], every device loading the keys from
    /// `bytes` (written by [`BootstrapKeys::save`]).
    ///
    /// # Errors
    /// As [`MultiBootstrapper::new`]; malformed or foreign key bytes are a
    /// [`hemem_ckks::SerializationError`] inside each device's failure.
    pub fn from_key_bytes(
        contexts: Vec<Context>,
        schedule: BootstrapSchedule,
        bytes: &[u8],
        options: BootstrapOptions,
    ) -> Result<Self> {
        Self::build(contexts, schedule, KeySource::Bytes(bytes), options)
    }

    /// As [`MultiBootstrapper::new`], every device streaming the key file
    /// at `path` ([`BootstrapKeys::save_to_path`]) into its memory: the
    /// host never holds the whole key set.
    ///
    /// # Errors
    /// As [`MultiBootstrapper::from_key_bytes`], and I/O errors.
    pub fn from_key_file(
        contexts: Vec<Context>,
        schedule: BootstrapSchedule,
        path: &Path,
        options: BootstrapOptions,
    ) -> Result<Self> {
        Self::build(contexts, schedule, KeySource::File(path), options)
    }

    fn build(
        contexts: Vec<Context>,
        schedule: BootstrapSchedule,
        keys: KeySource<'_>,
        options: BootstrapOptions,
    ) -> Result<Self> {
        let first = contexts.first().ok_or(Error::InvalidParameter {
            name: "contexts",
            reason: "a device group needs at least one context",
        })?;
        let fingerprint = first.params().fingerprint();
        if contexts
            .iter()
            .any(|c| c.params().fingerprint() != fingerprint)
        {
            return Err(Error::InvalidParameter {
                name: "contexts",
                reason: "every context of a device group must have the same parameters",
            });
        }
        // The keys' own context keeps them; the others load one serialized
        // copy (made only if some context needs it).
        let (home, owned, serialized, file) = match keys {
            KeySource::Keys(keys) => {
                let home = keys
                    .context()
                    .and_then(|k| contexts.iter().position(|c| c.ptr_eq(k)));
                let serialized = if contexts.len() > usize::from(home.is_some()) {
                    let mut bytes = Vec::new();
                    keys.save(&mut bytes)?;
                    Some(bytes)
                } else {
                    None
                };
                (home, Some(*keys), serialized, None)
            }
            KeySource::Bytes(b) => (None, None, None, Some(KeyInput::Bytes(b))),
            KeySource::File(p) => (None, None, None, Some(KeyInput::File(p))),
        };
        let input = match (&serialized, file) {
            (Some(bytes), _) => Some(KeyInput::Bytes(bytes)),
            (None, other) => other,
        };
        let owned = Mutex::new(owned);
        let loaded = on_each(&contexts, |i, context| {
            if home == Some(i)
                && let Some(keys) = owned.lock().unwrap_or_else(PoisonError::into_inner).take()
            {
                return Ok(keys);
            }
            match input {
                Some(KeyInput::Bytes(bytes)) => Ok(BootstrapKeys::load(context, bytes)?),
                Some(KeyInput::File(path)) => Ok(BootstrapKeys::load_from_path(context, path)?),
                None => Err(Error::InvalidParameter {
                    name: "keys",
                    reason: "no key source for this device",
                }),
            }
        })?;
        drop(serialized);
        let loaded: Vec<Mutex<Option<BootstrapKeys>>> =
            loaded.into_iter().map(|k| Mutex::new(Some(k))).collect();
        let bootstrappers = on_each(&contexts, |i, context| {
            let keys = loaded
                .get(i)
                .and_then(|k| k.lock().unwrap_or_else(PoisonError::into_inner).take())
                .ok_or(Error::InvalidParameter {
                    name: "keys",
                    reason: "a device's keys were taken twice",
                })?;
            Bootstrapper::with_options(context, schedule.clone(), keys, options)
        })?;
        Ok(Self {
            schedule,
            members: contexts
                .into_iter()
                .zip(bootstrappers)
                .map(|(context, bootstrapper)| Member {
                    bootstrapper,
                    context,
                    bootstrapped: AtomicU64::new(0),
                })
                .collect(),
            split: Split::default(),
        })
    }

    /// The same group, spreading batches as `split` says.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for [`Split::Stealing`] with a chunk of
    /// 0 inputs.
    pub fn with_split(mut self, split: Split) -> Result<Self> {
        split.ranges(0, 1)?;
        self.split = split;
        Ok(self)
    }

    /// How batches are spread.
    pub fn split(&self) -> Split {
        self.split
    }

    /// The devices, in group order (a GPU appears once per logical device on
    /// it).
    pub fn devices(&self) -> Vec<Device> {
        self.members.iter().map(|m| m.context.device()).collect()
    }

    /// Number of devices (at least 1).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always `false`: a group has at least one device.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The context of device `index`: encrypt there to spare the inputs a
    /// move, and read its memory statistics.
    pub fn context(&self, index: usize) -> Option<&Context> {
        self.members.get(index).map(|m| &m.context)
    }

    /// The bootstrapper of device `index` (its schedule, hoisting, constant
    /// bytes, batch limit).
    pub fn bootstrapper(&self, index: usize) -> Option<&Bootstrapper> {
        self.members.get(index).map(|m| &m.bootstrapper)
    }

    /// The schedule, common to every device.
    pub fn schedule(&self) -> &BootstrapSchedule {
        &self.schedule
    }

    /// How many inputs each device has bootstrapped so far, in group order.
    pub fn bootstrapped_counts(&self) -> Vec<u64> {
        self.members
            .iter()
            .map(|m| m.bootstrapped.load(Ordering::Relaxed))
            .collect()
    }

    /// Encodes SlotToCoeff's diagonals for inputs at `scale` on every device
    /// at once ([`Bootstrapper::prepare_for_scale`]).
    ///
    /// # Errors
    /// [`Error::DeviceFailures`] naming each device that failed.
    pub fn prepare_for_scale(&self, scale: Scale) -> Result<()> {
        let contexts: Vec<Context> = self.members.iter().map(|m| m.context.clone()).collect();
        on_each(&contexts, |i, _| match self.members.get(i) {
            Some(m) => m.bootstrapper.prepare_for_scale(scale),
            None => Ok(()),
        })
        .map(|_| ())
    }

    /// Bootstraps `inputs` (complex slot values) across the devices and
    /// returns the outputs in input order, each in its input's context.
    /// Each device gets its share as [`Split`] says, moves the inputs that
    /// live elsewhere into its own context (through the host, serialized;
    /// an input may come from any context of the group's parameters, a
    /// client's for instance, so it must be encrypted under the secret
    /// the group's keys were made for: unlike [`Bootstrapper::bootstrap`],
    /// which refuses any context but its own, the group cannot tell, and
    /// another secret's input bootstraps to noise),
    /// bootstraps them as one batch ([`Bootstrapper::bootstrap_many`]:
    /// stage by stage, halved when its budget refuses the batch) and moves
    /// the outputs back. The outputs are bit for bit those of
    /// [`Bootstrapper::bootstrap_many`] on one device.
    ///
    /// # Errors
    /// [`Error::DeviceFailures`]: every device that failed, with the inputs
    /// it held and the cause ([`Error::LevelTooLow`], `OverBudget`, a
    /// driver error...). No output is returned then. Even shares all run,
    /// so every failing share is named; under [`Split::Stealing`], once a
    /// device has failed the others take no new chunk.
    pub fn bootstrap_many(&self, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>> {
        self.bootstrap_many_with_progress(inputs, false, &NoProgress)
    }

    /// [`MultiBootstrapper::bootstrap_many`] for real slot values
    /// ([`Bootstrapper::bootstrap_real_many`]).
    ///
    /// # Errors
    /// As [`MultiBootstrapper::bootstrap_many`].
    pub fn bootstrap_real_many(&self, inputs: &[Ciphertext]) -> Result<Vec<Ciphertext>> {
        self.bootstrap_many_with_progress(inputs, true, &NoProgress)
    }

    /// [`MultiBootstrapper::bootstrap_many`] (or, with `real_only`,
    /// [`MultiBootstrapper::bootstrap_real_many`]) reporting the inputs
    /// finished to `progress`: `(0, n)` first, then after each share or
    /// chunk (from the device's thread, one report at a time, counts
    /// increasing).
    ///
    /// # Errors
    /// As [`MultiBootstrapper::bootstrap_many`].
    pub fn bootstrap_many_with_progress(
        &self,
        inputs: &[Ciphertext],
        real_only: bool,
        progress: &dyn Progress,
    ) -> Result<Vec<Ciphertext>> {
        let total = inputs.len() as u64;
        progress.update(0, total);
        split::run_split(
            inputs.len(),
            self.members.len(),
            self.split,
            |worker, range| self.run_share(worker, inputs, range, real_only),
            |done| progress.update(done as u64, total),
        )
        .map_err(|failures| Error::DeviceFailures {
            failures: failures
                .into_iter()
                .map(|f| DeviceFailure {
                    index: f.worker,
                    device: self
                        .members
                        .get(f.worker)
                        .map_or(Device::Cpu, |m| m.context.device()),
                    inputs: f.inputs,
                    error: Box::new(f.error),
                })
                .collect(),
        })
    }

    /// Device `worker`'s part of a batch: `inputs[range]` moved in,
    /// bootstrapped, moved back.
    fn run_share(
        &self,
        worker: usize,
        inputs: &[Ciphertext],
        range: Range<usize>,
        real_only: bool,
    ) -> Result<Vec<Ciphertext>> {
        let member = self.members.get(worker).ok_or(Error::InvalidParameter {
            name: "worker",
            reason: "no such device in the group",
        })?;
        let share = inputs.get(range).ok_or(Error::InvalidParameter {
            name: "inputs",
            reason: "a share beyond the batch",
        })?;
        let here = &member.context;
        let run = |batch: &[Ciphertext]| {
            if real_only {
                member.bootstrapper.bootstrap_real_many(batch)
            } else {
                member.bootstrapper.bootstrap_many(batch)
            }
        };
        let outputs = if share.iter().all(|c| c.context().ptr_eq(here)) {
            run(share)?
        } else {
            let moved = share
                .iter()
                .map(|c| {
                    if c.context().ptr_eq(here) {
                        c.clone_as(MemoryClass::Ciphertext)
                    } else {
                        move_to(c, here)
                    }
                })
                .collect::<hemem_ckks::Result<Vec<_>>>()?;
            run(&moved)?
        };
        member
            .bootstrapped
            .fetch_add(outputs.len() as u64, Ordering::Relaxed);
        outputs
            .into_iter()
            .zip(share)
            .map(|(out, input)| {
                if input.context().ptr_eq(here) {
                    Ok(out)
                } else {
                    Ok(move_to(&out, input.context())?)
                }
            })
            .collect()
    }
}

/// `ct` in `context`: serialized on the host and loaded there (the
/// documented way between contexts; on a GPU, a download and an upload).
fn move_to(ct: &Ciphertext, context: &Context) -> hemem_ckks::Result<Ciphertext> {
    Ciphertext::from_bytes(context, &ct.to_bytes()?)
}

/// `f(i, context)` for every context at once, one scoped thread each; the
/// results in order, or every device's failure (with no inputs named).
fn on_each<T: Send>(
    contexts: &[Context],
    f: impl Fn(usize, &Context) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    split::run_split(
        contexts.len(),
        contexts.len(),
        Split::Even,
        |i, _| {
            let context = contexts.get(i).ok_or(Error::InvalidParameter {
                name: "contexts",
                reason: "no such device in the group",
            })?;
            Ok(vec![f(i, context)?])
        },
        |_| {},
    )
    .map_err(|failures| Error::DeviceFailures {
        failures: failures
            .into_iter()
            .map(|f| DeviceFailure {
                index: f.worker,
                device: contexts.get(f.worker).map_or(Device::Cpu, Context::device),
                inputs: 0..0,
                error: Box::new(f.error),
            })
            .collect(),
    })
}
