//! The `planned` policy: no managed memory; read-only objects streamed.

use super::PlacementPolicy;
use crate::{AllocRequest, MemoryClass, Placement, Result};

/// hemem's own policy (DESIGN.md, "planned"): switching keys and
/// bootstrapping diagonals — written once, then only read — are
/// [`Placement::Streamed`] (a pinned host master and a pooled device slot
/// while resident, fetched ahead of use along the recorded order of the
/// work); everything else, and anything secret, lives in the pool. No
/// managed memory, so it behaves the same on a real small card as under an
/// emulated budget.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlannedPolicy;

impl PlannedPolicy {
    /// The planned rule for one request.
    pub const fn placement_for(class: MemoryClass, sensitive: bool) -> Placement {
        if class.is_read_only() && !sensitive {
            Placement::Streamed
        } else {
            Placement::DevicePool
        }
    }
}

impl PlacementPolicy for PlannedPolicy {
    fn name(&self) -> &'static str {
        "planned"
    }

    fn place(&self, request: &AllocRequest) -> Result<Placement> {
        Ok(Self::placement_for(request.class, request.sensitive))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::request;

    #[test]
    fn read_only_classes_stream_and_secrets_stay_pooled() {
        let policy = PlannedPolicy;
        for (n, class) in MemoryClass::ALL.into_iter().enumerate() {
            let mut r = request(n as u64 + 1, class, 4096);
            let expected = match class {
                MemoryClass::EvaluationKey | MemoryClass::BootstrapConstant => Placement::Streamed,
                _ => Placement::DevicePool,
            };
            assert_eq!(policy.place(&r), Ok(expected), "{class}");
            r.sensitive = true;
            assert_eq!(
                policy.place(&r),
                Ok(Placement::DevicePool),
                "{class}, secret"
            );
        }
        assert_eq!(policy.name(), "planned");
        assert_eq!(
            "planned".parse::<crate::PolicyKind>(),
            Ok(crate::PolicyKind::Planned)
        );
    }
}
