//! [`DiagonalStorage::Fit`]: which of its data a [`Bootstrapper`] keeps in
//! full, chosen by the device's budget.
//!
//! Compact data (seeded keys, compact diagonals) is what lets FGb bootstrap
//! on a 2 GiB card, but it is regenerated on every use: on the H100,
//! regenerating the keys' uniform halves cost an FGb bootstrap 3.8 ms for
//! the 1.96 GB it saves, and expanding the DFT diagonals 6.4 ms for 2.07 GB
//! (docs/BENCHMARKS.md, "Compact data on the GPU": 59.1 ms compact against
//! 48.9 ms with both stored), most of it since spared for the diagonals
//! that repeat (item 4 below) and, for the keys, by a seeded inner product
//! that computes each ChaCha block with a quad of threads: about 0.6 ms
//! now (37.5 against 36.9 ms with the diagonals encoded, "Sixteenth
//! session"). Every form gives bit-identical results — a
//! stored half is the one its seed regenerates, an encoded diagonal the
//! expansion of its compact one — so where the budget has room, keeping
//! data in full is pure gain, and where it has none, compact data is what
//! fits. Issue 11 names this choice ("regenerating an object on the device
//! instead of moving it") as the planner's; this is its first, static form.
//!
//! The rule, greedy by time saved per byte, over the room the budget leaves
//! beside everything the device holds now, the compact diagonals, and one
//! bootstrap's working memory ([`working_ciphertexts`] top-level
//! ciphertexts, fewer under `planned`, which streams what an estimate
//! leaves short instead of refusing it):
//!
//! 1. the relinearisation key's uniform halves: one key, used by every
//!    multiplication of EvalMod (a dozen key switches per bootstrap, about
//!    0.01 ms of regeneration each at FGb's top level);
//! 2. CoeffToSlot's first factor, diagonal after diagonal while they fit
//!    ([`DiagonalStorage::Mixed`]): its diagonals repeat only over all the
//!    slots, so a compact one expands by a whole transform (about 3.1 ms
//!    saved per GB at FGb);
//! 3. the other keys' halves, conjugation first, then the rotations and
//!    the sparse-secret keys, each while it fits (about 0.3 ms per GB);
//! 4. the rest of the diagonals: all encoded ([`DiagonalStorage::Encoded`])
//!    when they fit, with SlotToCoeff's for [`STC_CACHE_CAPACITY`] input
//!    scales; else CoeffToSlot's other factors in order while they fit.
//!    Their diagonals repeat every 1024 and 32 slots at FGb: kept encoded
//!    they are periodic ([`hemem_ckks::encoding::Plaintext::is_periodic`],
//!    `2·period` values a limb, 32 and 1024 times smaller than in full),
//!    and compact they expand into that same periodic form by a transform
//!    of `2·period` points ([`hemem_ckks::ntt::forward_subring`]), so
//!    either form costs little: they come last.
//!
//! A CPU context has no device budget: there the room is half the host
//! memory the operating system reports available ([`HOST_SHARE`]), less the
//! same working reserve. Stored data pays on the CPU too: measured in one
//! sitting, before that session's faster CPU arithmetic, one thread
//! bootstrapped FGb in 15.0–15.3 s with everything stored against
//! 19.8–21.5 s with everything compact (17.8–18.8 s with only the diagonals
//! encoded; docs/BENCHMARKS.md, "CPU bootstrap, FGb, sixth session"), for
//! 9.6 GB of peak memory against 5.7 GB and a key setup of 22 s against 11.
//! Keys an
//! evaluator already shares (a cloned [`BootstrapKeys::key_set`]) cannot be
//! changed in place and are left as they are.
//!
//! The choice is made once, when the bootstrapper is made, on what the
//! device holds then. A batch ([`Bootstrapper::bootstrap_many`]) needs
//! working memory per ciphertext; the room reserved here is one
//! bootstrap's, and a batch that does not fit beside what was kept is
//! halved as usual. A program that will hold much more of its own data on
//! the device afterwards, under a budget and a policy that cannot stream
//! (`device`), should ask for [`DiagonalStorage::Compact`]: under `planned`
//! what was kept in full streams like the rest when room runs short.

use std::sync::Arc;

use hemem_ckks::Context;
use hemem_ckks::keys::{KeyKind, KeySet, SwitchingKey};

use super::batch::is_over_budget;
use super::{BootstrapKeys, Bootstrapper, STC_CACHE_CAPACITY, SseKeys};
use crate::Result;
use crate::dft::{FactorBytes, HomomorphicDft};
use crate::hoisting::Hoisting;
use crate::linear_transform::DiagonalStorage;
use crate::schedule::{BootstrapSchedule, INPUT_LEVEL};

/// One bootstrap's working memory, in top-level ciphertexts (two polynomials
/// of `top_level + 1` limbs each), reserved before anything is kept in
/// full. Measured on the H100 with single hoisting, the device peak beside
/// the keys and diagonals is about 32 such ciphertexts at FGb (0.83 GB
/// under the `device` policy, 0.65 GB of pooled temporaries under
/// `planned`) and 44 at FVb (docs/BENCHMARKS.md); 48 leaves room for the
/// pool's rounding and double hoisting's extended temporaries.
pub const WORKING_CIPHERTEXTS: u64 = 48;

/// [`WORKING_CIPHERTEXTS`] under the `planned` policy, which streams what
/// does not fit instead of refusing it: an estimate short by a few
/// ciphertexts costs a few fetches there, not an `OverBudget` error, so
/// the reserve is a measured figure, not a bound. Every ciphertext of
/// reserve is room `fit` cannot spend on data kept in full. Measured on the
/// H100 with FGb (docs/BENCHMARKS.md, "Eleventh session"), once the
/// repeating DFT diagonals were kept as one period (their compact forms,
/// and the room reserved for SlotToCoeff's cached ones, 5× smaller): at 20,
/// 5 and 6 GiB fetched 0.2–0.7 GB a bootstrap and 6 GiB took 47–53 ms; at
/// 26 the first bootstraps still fetched at 5 and 6 GiB; at 32 nothing was
/// fetched after the first bootstrap at 3, 4, 5 or 6 GiB (45.2, 43.6,
/// 42.7, 41.7 ms). 32 is the least of those tried that streams nothing.
pub const STREAMING_WORKING_CIPHERTEXTS: u64 = 32;

/// The working memory [`DiagonalStorage::Fit`] reserves by default in
/// `context`, in top-level ciphertexts: [`STREAMING_WORKING_CIPHERTEXTS`]
/// under the `planned` policy, [`WORKING_CIPHERTEXTS`] under any other.
pub fn working_ciphertexts(context: &Context) -> u64 {
    match context.backend().allocator().policy_name() {
        Some("planned") => STREAMING_WORKING_CIPHERTEXTS,
        _ => WORKING_CIPHERTEXTS,
    }
}

/// The device budget, in top-level ciphertexts, from which a batch's
/// ciphertexts share each compact diagonal's expansion by default
/// ([`Bootstrapper::shared_expansions`]). Sharing by two holds one more
/// ciphertext's baby-step rotations at once: at FGb about ten top-level
/// ciphertexts more (the peak beside the streamed data rose from 1.17 to
/// 1.42 GB in a batch of 8). Measured on the H100 (docs/BENCHMARKS.md,
/// fifteenth session): FGb's batch of 8 at 2 GiB (82 of its top-level
/// ciphertexts) bootstraps in 41.1–41.4 ms a ciphertext shared against
/// 42.9–43.9 unshared; FVb's batch of 2 at 4 GiB (68 of its own) took
/// 106.7 shared against 102.5 unshared in one call and 101.3 against 102.5
/// in another (no gain beyond the noise), and at 2 GiB (34) does not fit
/// shared (128.9 ms unshared against 139.2 after a refused shared try).
/// 80 lies between the clear gain and the rest.
pub const SHARING_MIN_CIPHERTEXTS: u64 = 80;

/// How many ciphertexts of a batch share each compact diagonal's expansion
/// when the options do not say: [`SHARED_EXPANSIONS`](super::SHARED_EXPANSIONS)
/// where the device budget holds [`SHARING_MIN_CIPHERTEXTS`] top-level
/// ciphertexts of `schedule` or there is no budget (a CPU context), else 1.
pub(super) fn default_shared_expansions(context: &Context, schedule: &BootstrapSchedule) -> usize {
    let budget = context
        .backend()
        .allocator()
        .residency_usage()
        .map(|u| u.budget);
    sharing_for(budget, top_ciphertext_bytes(context, schedule))
}

/// Bytes of one top-level ciphertext of `schedule` (two polynomials of
/// `top_level + 1` limbs): the unit of [`working_ciphertexts`] and
/// [`SHARING_MIN_CIPHERTEXTS`].
pub(super) fn top_ciphertext_bytes(context: &Context, schedule: &BootstrapSchedule) -> u64 {
    2 * (schedule.top_level as u64 + 1) * 8 * context.params().degree().get() as u64
}

/// [`default_shared_expansions`] for a device `budget` (`None`: none) and
/// top-level ciphertexts of `ciphertext` bytes.
fn sharing_for(budget: Option<u64>, ciphertext: u64) -> usize {
    match budget {
        Some(b) if b < SHARING_MIN_CIPHERTEXTS.saturating_mul(ciphertext) => 1,
        _ => super::SHARED_EXPANSIONS,
    }
}

/// What [`fit`] chose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Fitted {
    /// How the DFT diagonals are kept.
    pub storage: DiagonalStorage,
    /// Keys whose uniform halves were stored, and their bytes.
    pub expanded_keys: usize,
    /// See `expanded_keys`.
    pub expanded_bytes: u64,
}

/// The share of the host's available memory [`fit`] may fill on a CPU
/// context: one part in `HOST_SHARE`, so that the rest of the program (and
/// the machine's other programs) keep the other half.
pub const HOST_SHARE: u64 = 2;

/// The room [`fit`] may spend: the budget less what the device holds now
/// (everything streamed or managed counted as if resident) and less
/// `reserved`; on a CPU context, which has no budget, [`host_room`] of the
/// memory the operating system reports available. `None` when neither is
/// known.
pub(super) fn spare_room(context: &Context, reserved: u64) -> Option<u64> {
    let Some(usage) = context.backend().allocator().residency_usage() else {
        return host_room(hemem_memory::host::available_bytes(), reserved);
    };
    let held = usage.pool_used
        + usage.managed_allocated
        + usage
            .streamed_allocated
            .saturating_sub(usage.streamed_resident);
    Some(usage.budget.saturating_sub(held).saturating_sub(reserved))
}

/// A CPU context's room: [`HOST_SHARE`]'s part of the `available` host
/// memory, less `reserved`.
fn host_room(available: Option<u64>, reserved: u64) -> Option<u64> {
    available.map(|bytes| (bytes / HOST_SHARE).saturating_sub(reserved))
}

/// What keeping a key's uniform halves adds: as many bytes as the `b`
/// halves held now; nothing for a key that already has them.
fn halves_bytes(key: &SwitchingKey) -> u64 {
    if key.is_compressed() {
        key.size_bytes() as u64
    } else {
        0
    }
}

/// The sums of `sizes`' compact bytes and of what keeping them encoded adds.
pub(super) fn totals(sizes: &[FactorBytes]) -> (u64, u64) {
    sizes.iter().fold((0, 0), |(compact, extra), f| {
        (
            compact + f.compact,
            extra + f.encoded.saturating_sub(f.compact),
        )
    })
}

/// The choice [`choose`] makes, before anything is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Choice {
    storage: DiagonalStorage,
    /// Whether the relinearisation key's halves are stored.
    relinearization: bool,
    /// For each other key, in the order given, whether its halves are.
    others: Vec<bool>,
    /// The bytes all of it adds.
    added: u64,
}

/// The greedy rule of the [module documentation](self) over `spare`
/// bytes: the relinearisation key's halves (`relinearization`, their bytes
/// if it has none stored yet); CoeffToSlot's `full` factors (those whose
/// diagonals expand by a whole transform), factor after factor; the
/// `others` keys' halves in order; then the rest of the diagonals — all of
/// them encoded when what they add fits (`repeating`, CoeffToSlot's other
/// factors, and `stc_extra`, what keeping SlotToCoeff's encoded adds for
/// every cached scale), else the `repeating` factors in order.
fn choose(
    spare: u64,
    relinearization: Option<u64>,
    full: &[FactorBytes],
    repeating: &[FactorBytes],
    stc_extra: u64,
    others: &[u64],
) -> Choice {
    let mut left = spare;
    let take = |left: &mut u64, bytes: u64| {
        let fits = bytes <= *left;
        if fits {
            *left -= bytes;
        }
        fits
    };
    let relinearization = relinearization.is_some_and(|bytes| take(&mut left, bytes));
    let (mut encoded_bytes, all_full) = fill(&mut left, full);
    let others = others.iter().map(|&bytes| take(&mut left, bytes)).collect();
    let (_, repeating_extra) = totals(repeating);
    let storage = if all_full && take(&mut left, repeating_extra + stc_extra) {
        DiagonalStorage::Encoded
    } else {
        if all_full {
            encoded_bytes += fill(&mut left, repeating).0;
        }
        if encoded_bytes > 0 {
            DiagonalStorage::Mixed { encoded_bytes }
        } else {
            DiagonalStorage::Compact
        }
    };
    Choice {
        storage,
        relinearization,
        others,
        added: spare - left,
    }
}

/// CoeffToSlot's diagonals of `factors`, factor after factor, while what
/// they add fits in `left` (taken from it): as [`DiagonalStorage::Mixed`]
/// fills its room, so the filling stops at the first factor that does not
/// fit whole. Their encoded bytes, and whether every factor fitted.
fn fill(left: &mut u64, factors: &[FactorBytes]) -> (u64, bool) {
    let mut encoded_bytes = 0;
    for factor in factors {
        let count = factor.diagonals.max(1);
        let (encoded, compact) = (factor.encoded / count, factor.compact / count);
        let extra = encoded.saturating_sub(compact);
        let kept = left.checked_div(extra).map_or(count, |n| count.min(n));
        *left -= kept * extra;
        encoded_bytes += kept * encoded;
        if kept < count {
            return (encoded_bytes, false);
        }
    }
    (encoded_bytes, true)
}

/// Resolves [`DiagonalStorage::Fit`] for a bootstrapper of `schedule` in
/// `context` (see the [module documentation](self)), storing the uniform
/// halves of the `keys` chosen; `cts` is CoeffToSlot's DFT as it will be
/// encoded; `working_reserve` overrides [`working_ciphertexts`].
///
/// # Errors
/// Allocation errors while storing key halves.
pub(super) fn fit(
    context: &Context,
    schedule: &BootstrapSchedule,
    keys: &mut BootstrapKeys,
    cts: &HomomorphicDft,
    hoisting: Hoisting,
    working_reserve: Option<u64>,
) -> Result<Fitted> {
    let params = context.params();
    let limb_bytes = 8 * params.degree().get() as u64;
    let special = params.p_moduli().len();
    let cts_sizes = cts.encoded_sizes(
        schedule.top_level,
        schedule.log_bsgs_ratio,
        hoisting,
        limb_bytes,
        special,
    );
    let stc_sizes = schedule.stc_dft()?.encoded_sizes(
        INPUT_LEVEL,
        schedule.log_bsgs_ratio,
        hoisting,
        limb_bytes,
        special,
    );
    let (cts_compact, _) = totals(&cts_sizes);
    let (stc_compact, stc_extra) = totals(&stc_sizes);
    let cached = STC_CACHE_CAPACITY as u64;
    let reserve = working_reserve.unwrap_or_else(|| working_ciphertexts(context));
    // Saturating: a reserve past any memory (a user's `working_reserve`)
    // leaves no room, so everything stays compact, instead of wrapping.
    let working = reserve.saturating_mul(top_ciphertext_bytes(context, schedule));
    let compact = Fitted {
        storage: DiagonalStorage::Compact,
        ..Fitted::default()
    };
    let needed = working
        .saturating_add(cts_compact)
        .saturating_add(cached.saturating_mul(stc_compact));
    let Some(spare) = spare_room(context, needed) else {
        return Ok(compact);
    };
    // Keys an evaluator already shares stay as they are.
    let mut relinearization = None;
    let mut others: Vec<&mut SwitchingKey> = Vec::new();
    if let Some(set) = Arc::get_mut(&mut keys.keys) {
        for key in set.keys_mut() {
            if key.kind() == KeyKind::Relinearization {
                relinearization = Some(key);
            } else {
                others.push(key);
            }
        }
    }
    if let Some(sse) = &mut keys.sse {
        others.push(&mut sse.to_sparse);
        others.push(&mut sse.to_dense);
    }
    // The factors applied first, whose diagonals repeat only over all the
    // slots (expanded by a whole transform), and the rest.
    let slots = cts.slots() as u64;
    let (full, repeating) =
        cts_sizes.split_at(cts_sizes.iter().take_while(|f| f.period >= slots).count());
    let choice = choose(
        spare,
        relinearization.as_deref().map(halves_bytes),
        full,
        repeating,
        cached * stc_extra,
        &others.iter().map(|k| halves_bytes(k)).collect::<Vec<_>>(),
    );
    let mut fitted = Fitted {
        storage: choice.storage,
        ..Fitted::default()
    };
    let chosen = relinearization
        .filter(|_| choice.relinearization)
        .into_iter()
        .chain(
            others
                .into_iter()
                .zip(&choice.others)
                .filter_map(|(key, &take)| take.then_some(key)),
        );
    for key in chosen {
        let bytes = halves_bytes(key);
        if bytes == 0 {
            continue;
        }
        if let Err(e) = key.expand() {
            let e = crate::Error::from(e);
            // The estimate was wrong and the budget is full: the rest stay
            // seeded (a key whose expansion failed keeps no halves).
            if is_over_budget(&e) {
                break;
            }
            return Err(e);
        }
        fitted.expanded_keys += 1;
        fitted.expanded_bytes += bytes;
    }
    Ok(fitted)
}

impl Bootstrapper {
    /// Bytes of the keys the bootstrapper holds, as held (with the uniform
    /// halves [`DiagonalStorage::Fit`] chose to store).
    pub fn key_bytes(&self) -> usize {
        let set = self.key_set.size_bytes();
        set + self.sse.as_ref().map_or(0, SseKeys::size_bytes)
    }

    /// The keys the bootstrapper holds (relinearisation, conjugation,
    /// rotations): take them from here, or an evaluator with them from
    /// [`Bootstrapper::evaluator`], for your own multiplications and
    /// rotations. Taken before the bootstrapper is made (a clone of
    /// [`BootstrapKeys::key_set`]), they are shared, and
    /// [`DiagonalStorage::Fit`] leaves them as they are.
    pub fn key_set(&self) -> &Arc<KeySet> {
        &self.key_set
    }

    /// Keys whose uniform halves the bootstrapper stored when it resolved
    /// [`DiagonalStorage::Fit`] (0 for any other storage: the keys are then
    /// as the caller gave them).
    pub fn expanded_keys(&self) -> usize {
        self.expanded_keys
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use hemem_ckks::testing::seeded_rng;
    use rand_core::Rng;

    use super::*;

    /// FGb's batch shares at 2 GiB, FVb's not at 4 GiB but at 5; with no
    /// budget every batch shares.
    #[test]
    fn batches_share_expansions_where_the_budget_holds_enough_ciphertexts() {
        const GIB: u64 = 1 << 30;
        let fgb = 2 * 25 * 8 * (1 << 16); // top level 24
        let fvb = 2 * 30 * 8 * (1 << 17); // top level 29
        let shared = crate::SHARED_EXPANSIONS;
        assert_eq!(sharing_for(Some(2 * GIB), fgb), shared);
        assert_eq!(sharing_for(Some(2 * GIB), fvb), 1);
        assert_eq!(sharing_for(Some(4 * GIB), fvb), 1);
        assert_eq!(sharing_for(Some(5 * GIB), fvb), shared);
        assert_eq!(sharing_for(Some(SHARING_MIN_CIPHERTEXTS * fvb - 1), fvb), 1);
        assert_eq!(
            sharing_for(Some(SHARING_MIN_CIPHERTEXTS * fvb), fvb),
            shared
        );
        assert_eq!(sharing_for(None, fvb), shared);
    }

    /// A random size up to `max` bytes (never zero).
    fn size(rng: &mut impl Rng, max: u64) -> u64 {
        1 + rng.next_u64() % max
    }

    /// Over random sizes and rooms: the choice never spends more than the
    /// room, spends exactly what it chose, takes the relinearisation key
    /// first, the full factors before the other keys and those before the
    /// repeating factors, fills factors in order, and leaves nothing
    /// unchosen that would still fit in what is left.
    #[test]
    fn the_greedy_choice_fits_the_room_and_leaves_nothing_that_would_fit() {
        let mut rng = seeded_rng(0x0f17);
        let mut seen = [0usize; 3];
        for _ in 0..3000 {
            let factors = 1 + rng.next_u64() as usize % 4;
            let cts: Vec<FactorBytes> = (0..factors)
                .map(|_| {
                    let diagonals = size(&mut rng, 40);
                    let compact = size(&mut rng, 1 << 16);
                    FactorBytes {
                        diagonals,
                        compact: diagonals * compact,
                        period: compact,
                        encoded: diagonals * compact * (2 + rng.next_u64() % 30),
                    }
                })
                .collect();
            let (full, repeating) = cts.split_at(rng.next_u64() as usize % (factors + 1));
            let stc_extra = size(&mut rng, 1 << 24);
            let relin = (!rng.next_u64().is_multiple_of(4)).then(|| size(&mut rng, 1 << 24));
            let others: Vec<u64> = (0..rng.next_u64() % 12)
                .map(|_| size(&mut rng, 1 << 24))
                .collect();
            let (_, cts_extra) = totals(&cts);
            let everything =
                relin.unwrap_or(0) + cts_extra + stc_extra + others.iter().sum::<u64>();
            // Rooms from nothing to more than everything, many of them small.
            let shift = if rng.next_u64().is_multiple_of(3) {
                0
            } else {
                rng.next_u64() % 24
            };
            let spare = (rng.next_u64() % (everything + everything / 4 + 1)) >> shift;
            let choice = choose(spare, relin, full, repeating, stc_extra, &others);

            assert!(choice.added <= spare, "{choice:?} over {spare}");
            let left = spare - choice.added;
            // How many diagonals of each factor were kept: Mixed's room
            // filled as the DFT's encoding fills it, factor after factor,
            // stopping at the first factor that does not fit whole; the
            // room must be used exactly.
            let kept: Vec<u64> = match choice.storage {
                DiagonalStorage::Encoded => cts.iter().map(|f| f.diagonals).collect(),
                DiagonalStorage::Compact => vec![0; factors],
                DiagonalStorage::Mixed { encoded_bytes } => {
                    assert!(encoded_bytes > 0);
                    let mut room = encoded_bytes;
                    let kept = cts
                        .iter()
                        .map(|f| {
                            let enc = f.encoded / f.diagonals;
                            let k = f.diagonals.min(room / enc);
                            room -= k * enc;
                            k
                        })
                        .collect::<Vec<_>>();
                    assert_eq!(room, 0, "{choice:?} leaves part of its room unused");
                    kept
                }
                DiagonalStorage::Fit => panic!("Fit is never a choice"),
            };
            let extra_of = |f: &FactorBytes| (f.encoded - f.compact) / f.diagonals;
            // What the diagonals kept from factor `from` on add, with
            // SlotToCoeff's when all are encoded.
            let stc_kept = if choice.storage == DiagonalStorage::Encoded {
                stc_extra
            } else {
                0
            };
            let diagonals_from = |from: usize| -> u64 {
                cts[from..]
                    .iter()
                    .zip(&kept[from..])
                    .map(|(f, k)| k * extra_of(f))
                    .sum::<u64>()
                    + stc_kept
            };
            let keys = relin.filter(|_| choice.relinearization).unwrap_or(0)
                + others
                    .iter()
                    .zip(&choice.others)
                    .filter(|(_, t)| **t)
                    .map(|(b, _)| b)
                    .sum::<u64>();
            assert_eq!(choice.added, diagonals_from(0) + keys, "{choice:?}");
            // Factors are filled in order: a factor is started only when
            // every one before it is whole.
            let first_short = cts.iter().zip(&kept).position(|(f, k)| *k < f.diagonals);
            if let Some(i) = first_short {
                assert!(kept[i + 1..].iter().all(|&k| k == 0), "{choice:?}");
                // … and the next diagonal does not fit in what is left.
                assert!(
                    extra_of(&cts[i]) > left,
                    "{choice:?}: one more diagonal fits"
                );
            } else if choice.storage != DiagonalStorage::Encoded {
                assert!(stc_extra > left, "{choice:?}: SlotToCoeff's fit");
            }
            // The repeating factors (and SlotToCoeff's diagonals) get only
            // the room the keys left: a key refused did not fit in it.
            let after_keys = diagonals_from(full.len());
            for (bytes, taken) in others.iter().zip(&choice.others) {
                assert!(*taken || *bytes > left + after_keys, "{choice:?}");
            }
            // The relinearisation key goes first: refused only when it
            // alone is larger than the room.
            if let Some(r) = relin {
                assert_eq!(choice.relinearization, r <= spare, "{choice:?}");
                assert!(choice.relinearization || r > left);
            }
            for (bytes, taken) in others.iter().zip(&choice.others) {
                assert!(*taken || *bytes > left, "{choice:?}");
            }
            seen[match choice.storage {
                DiagonalStorage::Encoded => 0,
                DiagonalStorage::Mixed { .. } => 1,
                _ => 2,
            }] += 1;
        }
        // The rooms drawn reach every outcome.
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
    }

    /// A CPU context may fill half the available host memory beside its
    /// working reserve, and nothing when the memory is not known.
    #[test]
    fn a_cpu_context_takes_half_the_available_host_memory() {
        assert_eq!(host_room(None, 5), None);
        assert_eq!(host_room(Some(1000), 100), Some(400));
        assert_eq!(host_room(Some(150), 100), Some(0));
    }

    /// With all the room in the world everything is kept in full; with
    /// none, nothing is.
    #[test]
    fn ample_room_keeps_everything_and_none_keeps_nothing() {
        let full = [FactorBytes {
            diagonals: 1,
            compact: 10,
            period: 8,
            encoded: 250,
        }];
        let repeating = [FactorBytes {
            diagonals: 1,
            compact: 10,
            period: 4,
            encoded: 240,
        }];
        let all = choose(u64::MAX / 2, Some(70), &full, &repeating, 33, &[5, 6, 7]);
        assert_eq!(all.storage, DiagonalStorage::Encoded);
        assert!(all.relinearization && all.others.iter().all(|&t| t));
        assert_eq!(all.added, 70 + 240 + 230 + 33 + 18);
        let none = choose(0, Some(70), &full, &repeating, 33, &[5, 6, 7]);
        assert_eq!(none.storage, DiagonalStorage::Compact);
        assert!(!none.relinearization && none.others.iter().all(|&t| !t));
        assert_eq!(none.added, 0);
        // Room for the key and the first factor only.
        let some = choose(70 + 240 + 4, Some(70), &full, &repeating, 33, &[5, 6, 7]);
        assert_eq!(some.storage, DiagonalStorage::Mixed { encoded_bytes: 250 });
        assert_eq!(some.others, [false, false, false]);
        // Room for the keys too, not for the repeating factor: the keys go
        // before it.
        let keys = choose(
            70 + 240 + 18 + 229,
            Some(70),
            &full,
            &repeating,
            33,
            &[5, 6, 7],
        );
        assert_eq!(keys.storage, DiagonalStorage::Mixed { encoded_bytes: 250 });
        assert_eq!(keys.others, [true, true, true]);
        // And with room for the repeating factor but not SlotToCoeff's.
        let most = choose(
            70 + 240 + 18 + 230,
            Some(70),
            &full,
            &repeating,
            33,
            &[5, 6, 7],
        );
        assert_eq!(most.storage, DiagonalStorage::Mixed { encoded_bytes: 490 });
    }
}
