//! Test helpers shared by this crate's and its dependants' tests (feature
//! `test-utils`).

use crate::GpuDevice;

/// Opens GPU 0 for a GPU test named `name`, or says why the test is skipped.
///
/// Prints `SKIP <name>: no GPU (<reason>)` and returns `None` when no GPU is
/// usable, so the test passes without checking anything *and says so*. With
/// `HEMEM_REQUIRE_GPU=1` (the staged GPU run sets it) a missing GPU fails the
/// test instead.
///
/// # Panics
/// When `HEMEM_REQUIRE_GPU=1` and no GPU can be opened.
pub fn gpu_or_skip(name: &str) -> Option<GpuDevice> {
    match GpuDevice::open(0) {
        Ok(device) => Some(device),
        Err(e) => {
            #[allow(
                clippy::panic,
                reason = "a required GPU that is missing fails the test"
            )]
            if gpu_required() {
                panic!("{name}: HEMEM_REQUIRE_GPU=1 but no GPU: {e}");
            }
            println!("SKIP {name}: no GPU ({e})");
            None
        }
    }
}

/// Whether `HEMEM_REQUIRE_GPU=1`.
pub fn gpu_required() -> bool {
    std::env::var("HEMEM_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// A copy of `device`'s pinned staging ring once its copies are done
/// (`None` before the first upload made the ring): a sensitive upload must
/// leave none of its words there.
///
/// # Errors
/// Driver errors of waiting for the ring's copies.
pub fn staging_words(device: &GpuDevice) -> crate::Result<Option<Vec<u64>>> {
    device.staging_words()
}
