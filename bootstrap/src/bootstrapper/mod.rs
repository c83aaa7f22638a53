//! [`Bootstrapper`]: SlotToCoeff-first CKKS bootstrapping on real
//! ciphertexts, for the HEaaN presets' structure (BOOTSTRAP-NOTES §1,
//! `docs/BOOTSTRAP-SCHEDULE.md`):
//!
//! 1. drop the input to level 3, keeping its scale;
//! 2. **SlotToCoeff** (levels 3 → 0), whose diagonal scales absorb the
//!    input scale and land on `Δ0 = q0·2^−ρ`;
//! 3. *(sparse-secret encapsulation)* switch to an ephemeral secret of
//!    Hamming weight 32 at level 0 (Bossuat et al., ePrint 2022/024);
//! 4. **ModRaise** to the top level, read at scale `q0`; *(SSE)* switch back
//!    to the dense secret;
//! 5. *(sparse slots)* SubSum: the trace onto the slots' subring;
//! 6. **CoeffToSlot** (levels `L → L−3`), one conjugation to split real and
//!    imaginary parts;
//! 7. **EvalMod** (scaled cosine, double angles, arcsine) on each part,
//!    recombined and relabelled to the post-bootstrap level's default scale.
//!
//! Written once over [`SlotArithmetic`](crate::arith::SlotArithmetic) (through [`CkksOps`](crate::CkksOps)), so it runs
//! wherever its ciphertexts live. Intermediates are `Temporary` memory, the
//! encoded DFT diagonals `BootstrapConstant`, the keys `EvaluationKey`.
//!
//! The diagonals and keys are kept in the fastest forms the device's budget
//! holds ([`DiagonalStorage::Fit`], `footprint`): compact diagonals (one
//! word per coefficient, expanded into `Temporary` memory a few at a time
//! as each transform runs) and seeded keys where room is short, encoded
//! diagonals and stored key halves where it is not — bit-identical either
//! way. SlotToCoeff's diagonals, which absorb the input scale, are cached
//! for the [`STC_CACHE_CAPACITY`] most recent input scales.
//!
//! The code is split by idea: [`Bootstrapper`] is here; `setup` builds it
//! (options, key checks, CoeffToSlot's diagonals), `diagonals` keeps the
//! DFT diagonals (SlotToCoeff's cache by input scale), `single` runs one
//! bootstrap stage by stage, `batch` runs many together (halving a batch
//! the device budget refuses), `stages` holds the steps both share
//! (ModRaise, SubSum, the EvalMod finish), `keys` the keys a schedule
//! needs, `footprint` which of them and of the diagonals are kept in
//! full, and `ratio` the BSGS ratio the memory holds the keys for
//! ([`Bootstrapper::fit_schedule`]).

mod batch;
mod diagonals;
mod footprint;
mod keys;
mod ratio;
mod setup;
mod single;
mod stages;

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use hemem_ckks::Context;
use hemem_ckks::encoding::{CompactPlaintext, Plaintext};
use hemem_ckks::eval::Evaluator;
use hemem_ckks::keys::KeySet;
use hemem_memory::MemoryClass;

pub use batch::SHARED_EXPANSIONS;
pub use diagonals::STC_CACHE_CAPACITY;
use diagonals::StcDft;
pub use footprint::{
    SHARING_MIN_CIPHERTEXTS, STREAMING_WORKING_CIPHERTEXTS, WORKING_CIPHERTEXTS,
    working_ciphertexts,
};
pub use keys::{BootstrapKeys, SseKeys, key_request};
pub use ratio::{FAST_LOG_BSGS_RATIO, GPU_LOG_BSGS_RATIO, MAX_LOG_BSGS_RATIO};
pub use setup::BootstrapOptions;
pub use single::Stage;

use crate::dft::EncodedDft;
use crate::eval_mod::EvalMod;
use crate::hoisting::Hoisting;
use crate::linear_transform::DiagonalStorage;
use crate::schedule::BootstrapSchedule;

/// Refreshes ciphertexts: see the [module documentation](self).
///
/// Inputs must be at level 3 or above, with the schedule's slot count, and
/// their slot values within the unit disk (|Re|, |Im| ≤ 1): values beyond
/// it are reduced modulo 1 by EvalMod and come out wrong — this cannot be
/// detected without the secret key. The output is at the preset's
/// post-bootstrap level with exactly that level's default scale.
pub struct Bootstrapper {
    context: Context,
    schedule: BootstrapSchedule,
    evaluator: Evaluator,
    /// The key set the evaluator holds (relinearisation, conjugation,
    /// rotations), for [`Bootstrapper::key_set`].
    key_set: Arc<KeySet>,
    sse: Option<SseKeys>,
    storage: DiagonalStorage,
    hoisting: Hoisting,
    cts: EncodedDft<Plaintext, CompactPlaintext>,
    /// SlotToCoeff by input scale (bits), most recently used first.
    stc: Mutex<Vec<(u64, Arc<StcDft>)>>,
    eval_mod: EvalMod,
    subsum: Vec<i64>,
    /// The most ciphertexts a batch runs together: halved whenever a batch
    /// did not fit the device budget ([`Bootstrapper::bootstrap_many`]).
    batch_limit: AtomicUsize,
    /// Keys whose uniform halves [`DiagonalStorage::Fit`] stored.
    expanded_keys: usize,
    /// Ciphertexts of a batch that share each compact diagonal's expansion:
    /// the option's figure, halved whenever a batch did not fit the device
    /// budget ([`Bootstrapper::bootstrap_many`]).
    shared_expansions: AtomicUsize,
}

impl Bootstrapper {
    /// An evaluator over the keys the bootstrapper was given (its
    /// [`BootstrapKeys::key_set`]: relinearisation, conjugation and the
    /// schedule's rotations), for the computation between bootstraps. The
    /// keys are shared, not copied; its results are ordinary
    /// [`MemoryClass::Ciphertext`] memory (the bootstrapper's own
    /// intermediates are `Temporary`).
    ///
    /// ```
    /// use hemem_bootstrap::ckks::prelude::*;
    /// use hemem_bootstrap::schedule::BootstrapSchedule;
    /// use hemem_bootstrap::{BootstrapKeys, Bootstrapper};
    ///
    /// # fn main() -> hemem_bootstrap::Result<()> {
    /// let params = Parameters::from_preset_with(Preset::TestFGb, SecurityCheck::AllowInsecure)?;
    /// let context = Context::new(params.clone(), DeviceSelection::Cpu)?;
    /// let keygen = KeyGenerator::new(&context)?;
    /// let secret = keygen.secret_key()?;
    /// let schedule = BootstrapSchedule::recommended_for_slots(&params, 8)?;
    /// let keys = BootstrapKeys::generate(&keygen, &secret, &schedule)?;
    /// let bootstrapper = Bootstrapper::new(&context, schedule, keys)?;
    /// // The relinearisation key went into the bootstrapper with the rest.
    /// let evaluator = bootstrapper.evaluator();
    /// evaluator.keys()?.relinearization_key()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn evaluator(&self) -> Evaluator {
        self.evaluator
            .clone()
            .with_output_class(MemoryClass::Ciphertext)
    }
}

impl std::fmt::Debug for Bootstrapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrapper")
            .field("parameters", &self.context.params().name())
            .field("slots", &self.schedule.slots())
            .field("sse", &self.sse.is_some())
            .field("storage", &self.storage)
            .field("hoisting", &self.hoisting)
            .finish_non_exhaustive()
    }
}
