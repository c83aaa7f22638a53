//! The look-ahead of the `planned` policy: the order in which a repeating
//! phase of work (a bootstrap, a batch of bootstraps) touches its streamed
//! objects, recorded on its first run and followed on the next ones.
//!
//! MemHC ("MemHC: An Optimized GPU Memory Management Framework for
//! Accelerating Many-body Correlation", `../shared/papers/memhc.txt`) evicts
//! with look-ahead over a task order known in advance; here the order is
//! learnt instead. Every operation that declares streamed objects is one
//! **step** of its phase. A phase is named by a key its caller chooses (the
//! bootstrapper hashes "bootstrap", the batch size and the kind of
//! bootstrap); this module knows nothing of CKKS.
//!
//! While a run matches its recording step by step, `Planner::next_use`
//! answers when an object is needed next, counted in steps from now: the
//! residency manager evicts the object needed farthest ahead (Belady's
//! rule) and brings back the next ones ahead of use. Phases repeat, so the
//! answer wraps around the end of the recording into the next run. A run
//! that departs from its recording stops the look-ahead for the rest of the
//! run and replaces the recording when the phase ends.
//!
//! # What stays and what streams
//!
//! Fetching ahead with Belady's rule alone (evict the object needed
//! farthest ahead to fetch the next one) turns a cycle into a sliding
//! window: the object just used is always the farthest, so every object
//! leaves after its use and comes back before its next, and the whole
//! working set crosses PCIe every run. Belady's demand schedule for a cycle
//! instead keeps a fixed part resident and streams the rest through what is
//! left. So when a recording is made, its objects are split
//! (`Recording::choose_stable`): a **stable** set, chosen by the fetches
//! it saves per byte, fills the room left after a **streaming** reserve —
//! two steps' bytes (one in use, the next arriving), or, where an offline
//! simulation of the recorded run says it moves fewer bytes, the most any
//! short window of steps touches (a batch reuses a factor's keys across its
//! ciphertexts within such a window); fetching ahead may evict only streaming objects. The
//! bytes moved per run are then the streaming objects' (each fetched once per
//! cluster of uses), close to the floor of what cannot fit.
//!
//! # Belady's schedule, fetched ahead ([`StreamingPlan::Belady`])
//!
//! A fixed split still moves more than Belady's demand schedule over the
//! same room (FGb at 2 GiB on the H100: 0.90 GB a bootstrap against a
//! 0.62 GB floor), because an object that is cheap to keep for one gap and
//! expensive for another must be one or the other. The finer plan keeps
//! Belady's decisions **per gap between two uses**: the demand schedule is
//! simulated over the room less a streaming reserve
//! (`Recording::choose_belady`), and every gap at whose end that schedule
//! fetches the object again is marked *dropped*; every other gap is *kept*.
//! At run time an object in a kept gap is never evicted to fetch ahead, and
//! an object in a dropped gap is a victim from its last use on — the moment
//! the schedule's eviction, made later at the miss, could have been made
//! without changing anything else. The kept objects never need more than the
//! room less the reserve, so the reserve (by default two of the largest
//! step's bytes) is always free for fetching ahead, and the bytes moved are
//! the schedule's: the floor of a slightly smaller room — where objects
//! do not fragment the device memory they share. Measured on the H100 (FGb
//! at 2 GiB, docs/BENCHMARKS.md), the streaming arena's chunks do fragment
//! under it: the run moved 1.14 GB a bootstrap against 0.97 GB planned,
//! where the window's split moved its planned 0.90 GB once the arena had
//! settled; so this plan is an option (`HEMEM_STREAMING_PLAN=belady`),
//! not the default for one bootstrap (`auto` takes it for a batch, below). Lookahead
//! eviction by next use over a known order is MemHC's (§ 4.3); deciding
//! per interval rather than per object is how Belady's rule reads when every
//! future use is known.
//!
//! # By the stalls a run would see ([`StreamingPlan::Stalls`])
//!
//! Bytes are not time. A copy is hidden when the compute before its use
//! is long enough; a burst of large objects used in quick succession waits
//! on PCIe whatever the bytes elsewhere. Measured on the H100 (FGb at
//! 2 GiB, docs/BENCHMARKS.md): each CoeffToSlot key takes ~1.6 ms to copy
//! against ~0.5 ms of key switch, and with the window split's 0.27 GB of
//! streaming room CoeffToSlot ran 10–15 ms slower than with everything on
//! the device, while SlotToCoeff and EvalMod had slack. So the run a phase
//! records (its first) is also timed on the device — each step's compute
//! from compute-stream events at its boundaries, and the copies' rate from
//! events around each fetch (`ResidencyDriver::take_run_times`; without a
//! measured rate, PCIe Gen5's ~50 GB/s) — and a stall model replays a
//! steady-state run of a split in time: the window's fetches in the
//! window's order on one serial copy stream, each starting when the room
//! it fills has been freed (after the last use of the object that left)
//! and each step when the step before it and its own fetches are done
//! (`stalls`). The `stalls` plan starts from the window split, takes the
//! fastest of the window's candidate rooms, and then greedily keeps the
//! objects the simulated run waits for and streams those whose copies
//! hide, while the simulated run gets shorter. Where the recorded run was
//! not timed (a run that departed from its recording replaced it), the
//! plan is the window split. It never leaves less streaming room than the
//! window split (a room of two steps beside a larger stable set left FVb's
//! temporaries no space under 2 GiB). It is MemHC's look-ahead (§ 4.3)
//! with each task's duration known as well as its order, and `auto`'s for one item:
//! on the H100 it bootstrapped FGb under 2 GiB in 58.7–61.3 ms against the
//! window split's 65.0–65.8 in one call, moving 1.2–1.4 GB a bootstrap
//! against 0.9–1.1.
//!
//! # Chosen by the phase's shape ([`StreamingPlan::Auto`], the default)
//!
//! A phase that runs several items stage by stage (a batch of bootstraps:
//! each key serves every ciphertext before the next key is needed) reuses
//! each object in runs of uses a few steps apart. There the per-gap plan
//! wins: it keeps an object through the short gaps of its run and drops it
//! after, where the stall split, made of whole objects and modelled on
//! one run of copies, keeps or streams it for every gap alike. Measured on
//! the H100 (twelfth session, three calls, docs/BENCHMARKS.md): a batch of
//! eight FGb bootstraps under 2 GiB took 42.95–45.35 ms a ciphertext under
//! `belady`, moving 2.0–3.7 GB a batch, against 47.2–50.6 ms and 2.6–11 GB
//! under `stalls`; a single bootstrap took 47.7–48.5 ms under `stalls`
//! against 52.9–54.3 ms under `belady`. So `auto` splits a phase of one
//! item with `stalls` and a phase of several with `belady`; the caller
//! names the items when it begins the phase
//! ([`Residency::begin_phase`](super::Residency::begin_phase)). With it
//! the batch took 45.96–46.27 ms a ciphertext and moved 2.0–2.7 GB a batch,
//! against 48.05–50.28 ms and 6.7 GB for the build that split it with
//! `stalls`, alternated in one call (thirteenth session, call 1).

mod planner;
mod recording;
mod stalls;

pub(crate) use planner::{Planner, RunEnd};
pub(crate) use recording::{Recording, StableChoice};
#[cfg(test)]
pub(in crate::residency) use stalls::tests::burst_case;
pub(crate) use stalls::{DEFAULT_COPY_RATE, MAX_BYTES_OVER_WINDOW, StepTimes};

/// How many steps ahead the residency manager fetches (see
/// [`Recording::simulate_window`]).
pub(crate) const LOOK_AHEAD: usize = 48;

/// How the `planned` policy decides which streamed objects stay on the
/// device between uses (see [`super::plan`]'s documentation;
/// `HEMEM_STREAMING_PLAN`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StreamingPlan {
    /// A fixed stable set, the rest streamed through a sliding window: of
    /// the plans, the fewest bytes moved on the H100.
    Window,
    /// Belady's demand schedule over the room less a reserve, decided per
    /// gap between two uses, fetched ahead into the reserve.
    Belady,
    /// The window split improved on the stall model of the recorded run
    /// (its steps' device times and the copies' rate): the objects of
    /// dense bursts stay, those used where compute hides a copy stream;
    /// never planning more than twice the window split's bytes (the
    /// model's error grows with them). The window split where the run was
    /// not timed. On the H100 it bootstraps FGb under 2 GiB in 58.7–61.3
    /// ms against the window's 65.0–65.8 (docs/BENCHMARKS.md), moving more
    /// bytes.
    Stalls,
    /// `Stalls` for a phase of one item, `Belady` for a phase that runs
    /// several items stage by stage (a batch): the default (see the
    /// module's "Chosen by the phase's shape").
    #[default]
    Auto,
}

impl StreamingPlan {
    /// Every plan.
    pub const ALL: [Self; 4] = [Self::Window, Self::Belady, Self::Stalls, Self::Auto];

    /// The plan's name (`HEMEM_STREAMING_PLAN`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Window => "window",
            Self::Belady => "belady",
            Self::Stalls => "stalls",
            Self::Auto => "auto",
        }
    }

    /// The plan a phase of `items` items is split with: `Auto` resolved
    /// (`Belady` for more than one item, else `Stalls`), any other plan
    /// itself.
    pub const fn for_items(self, items: usize) -> Self {
        match self {
            Self::Auto if items > 1 => Self::Belady,
            Self::Auto => Self::Stalls,
            plan => plan,
        }
    }
}

impl std::str::FromStr for StreamingPlan {
    type Err = crate::Error;

    fn from_str(s: &str) -> crate::Result<Self> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s.trim())
            .ok_or_else(|| {
                crate::ConfigError::InvalidSetting {
                    name: "HEMEM_STREAMING_PLAN",
                    value: s.to_owned(),
                }
                .into()
            })
    }
}
