//! Whether the CUDA driver library can be loaded, asked before anything
//! else touches cudarc (which panics when the library is missing).

/// Whether libcuda (the NVIDIA driver's CUDA library) can be loaded on this
/// machine. Does not start CUDA.
pub fn driver_present() -> bool {
    // SAFETY: is_culib_present only tries to dlopen the candidate library
    // names and drops what it opened; it calls no CUDA function.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether libcupti can be loaded.
pub(crate) fn cupti_present() -> bool {
    // SAFETY: as above, a dlopen probe of libcupti's names.
    unsafe { cudarc::cupti::sys::is_culib_present() }
}
