//! The `profiled` policy: §III-C of the hybrid-UM paper.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use super::{PlacementPolicy, StaticPolicy};
use crate::trace::{Decision, ProfilePlan, ProfileSettings, Trace};
use crate::{AllocRequest, Error, Placement, Result, TraceError};

/// What a replay does when the run leaves the recording.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Divergence {
    /// The allocation fails with [`TraceError::Divergence`] or
    /// [`TraceError::Exhausted`] (the default).
    #[default]
    Error,
    /// From the first divergence on, every allocation is placed by the static
    /// rule (§III-A); the divergence is kept for
    /// [`ProfiledPolicy::divergence`]. Placements before it followed the
    /// recording, placements after it follow the class: none is taken from a
    /// recording that no longer matches.
    FallBackToStatic,
}

/// The profiling scheme (Choi et al., §III-C): a recording run writes the
/// allocation trace; [`ProfilePlan::analyze`] picks pool or managed for every
/// allocation index from a lifetime threshold and a cap on peak pooled bytes;
/// this policy replays the picks.
///
/// The replay matches allocations by id (allocators number them 1, 2, 3, …
/// in request order) and checks each request's class and size against the
/// recording. A mismatch, or an allocation past the end of the recording, is
/// a divergence, handled as [`Divergence`] says. Ids below the recording's
/// last that it does not contain (requests that failed while recording) are
/// placed by the static rule.
#[derive(Debug)]
pub struct ProfiledPolicy {
    decisions: HashMap<u64, Decision>,
    recorded: u64,
    on_divergence: Divergence,
    diverged: AtomicBool,
    first_divergence: Mutex<Option<TraceError>>,
}

impl ProfiledPolicy {
    /// A replay of `plan`.
    pub fn new(plan: &ProfilePlan, on_divergence: Divergence) -> Self {
        let decisions: HashMap<u64, Decision> =
            plan.decisions.iter().map(|d| (d.id.0, *d)).collect();
        let recorded = decisions.keys().copied().max().unwrap_or(0);
        Self {
            decisions,
            recorded,
            on_divergence,
            diverged: AtomicBool::new(false),
            first_divergence: Mutex::new(None),
        }
    }

    /// Analyses `trace` with `settings` and replays the result.
    pub fn from_trace(trace: &Trace, settings: ProfileSettings, on_divergence: Divergence) -> Self {
        Self::new(&ProfilePlan::analyze(trace, settings), on_divergence)
    }

    fn diverge(&self, error: TraceError, request: &AllocRequest) -> Result<Placement> {
        match self.on_divergence {
            Divergence::Error => Err(Error::Trace(error)),
            Divergence::FallBackToStatic => {
                self.diverged.store(true, Ordering::Relaxed);
                let mut first = self
                    .first_divergence
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if first.is_none() {
                    *first = Some(error);
                }
                Ok(StaticPolicy::placement_for(request.class))
            }
        }
    }
}

impl PlacementPolicy for ProfiledPolicy {
    fn name(&self) -> &'static str {
        "profiled"
    }

    /// The first divergence met under [`Divergence::FallBackToStatic`].
    fn divergence(&self) -> Option<TraceError> {
        self.first_divergence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn place(&self, request: &AllocRequest) -> Result<Placement> {
        if self.diverged.load(Ordering::Relaxed) {
            return Ok(StaticPolicy::placement_for(request.class));
        }
        let index = request.id.0;
        match self.decisions.get(&index) {
            Some(d) if d.class == request.class && d.bytes == request.bytes as u64 => {
                Ok(d.placement)
            }
            Some(d) => self.diverge(
                TraceError::Divergence {
                    index,
                    recorded_class: d.class,
                    recorded_bytes: d.bytes,
                    found_class: request.class,
                    found_bytes: request.bytes as u64,
                },
                request,
            ),
            None if index > self.recorded => self.diverge(
                TraceError::Exhausted {
                    index,
                    recorded: self.recorded,
                },
                request,
            ),
            None => Ok(StaticPolicy::placement_for(request.class)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::policy::tests::request;
    use crate::trace::TraceRecord;
    use crate::{AllocationId, MemoryClass, StreamId};

    fn recording() -> Trace {
        let r = |id: u64, class, bytes, alloc_ns, free_ns| TraceRecord {
            id: AllocationId(id),
            class,
            bytes,
            placement: Placement::Host,
            stream: StreamId::Compute,
            alloc_ns,
            free_ns,
        };
        Trace {
            records: vec![
                r(1, MemoryClass::EvaluationKey, 1000, 0, None),
                r(2, MemoryClass::Temporary, 64, 10, Some(20)),
                r(3, MemoryClass::Ciphertext, 128, 30, Some(40)),
                // id 4 failed while recording
                r(5, MemoryClass::Temporary, 64, 50, Some(60)),
            ],
        }
    }

    fn settings() -> ProfileSettings {
        ProfileSettings {
            lifetime_threshold: Duration::from_nanos(15),
            peak_pool_cap: u64::MAX,
        }
    }

    #[test]
    fn replays_the_recording() {
        let p = ProfiledPolicy::from_trace(&recording(), settings(), Divergence::Error);
        // Short-lived 2, 3 and 5 are pooled, whatever their class.
        let expected = [
            (1, MemoryClass::EvaluationKey, 1000, Placement::Managed),
            (2, MemoryClass::Temporary, 64, Placement::DevicePool),
            (3, MemoryClass::Ciphertext, 128, Placement::DevicePool),
            (4, MemoryClass::Temporary, 8, Placement::DevicePool),
            (5, MemoryClass::Temporary, 64, Placement::DevicePool),
        ];
        for (id, class, bytes, placement) in expected {
            assert_eq!(p.place(&request(id, class, bytes)), Ok(placement), "{id}");
        }
        assert_eq!(
            p.place(&request(6, MemoryClass::Temporary, 64)),
            Err(TraceError::Exhausted {
                index: 6,
                recorded: 5
            }
            .into())
        );
    }

    #[test]
    fn divergence_is_an_error_or_a_clean_fallback() {
        let p = ProfiledPolicy::from_trace(&recording(), settings(), Divergence::Error);
        assert_eq!(
            p.place(&request(2, MemoryClass::Temporary, 96)),
            Err(TraceError::Divergence {
                index: 2,
                recorded_class: MemoryClass::Temporary,
                recorded_bytes: 64,
                found_class: MemoryClass::Temporary,
                found_bytes: 96
            }
            .into())
        );

        let p = ProfiledPolicy::from_trace(&recording(), settings(), Divergence::FallBackToStatic);
        assert_eq!(
            p.place(&request(1, MemoryClass::EvaluationKey, 1000)),
            Ok(Placement::Managed)
        );
        // Recorded as a ciphertext of 128 bytes (pooled); now a plaintext.
        assert_eq!(
            p.place(&request(3, MemoryClass::Plaintext, 128)),
            Ok(Placement::Managed)
        );
        // After the divergence even matching requests follow the static rule.
        assert_eq!(
            p.place(&request(5, MemoryClass::Temporary, 64)),
            Ok(Placement::DevicePool)
        );
        assert_eq!(
            p.place(&request(3, MemoryClass::Ciphertext, 128)),
            Ok(Placement::Managed)
        );
        assert!(matches!(
            p.divergence(),
            Some(TraceError::Divergence { index: 3, .. })
        ));
    }
}
