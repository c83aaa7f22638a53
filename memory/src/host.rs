//! What the operating system reports about host memory: the room a CPU
//! context's long-lived data may take (a CPU context has no device budget,
//! but keeping data in full pays there too: docs/BENCHMARKS.md, "CPU
//! bootstrap, FGb, sixth session").

/// Bytes of host memory available to a new allocation without swapping
/// (Linux `MemAvailable` in `/proc/meminfo`, read with the `procfs`
/// crate); `None` on other systems or when `/proc` cannot be read.
pub fn available_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use procfs::Current;
        procfs::Meminfo::current().ok()?.mem_available
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    /// On Linux the figure is read and lies between nothing and the
    /// machine's total memory.
    #[cfg(target_os = "linux")]
    #[test]
    fn available_memory_is_read_and_below_the_total() {
        use procfs::Current;
        let available = super::available_bytes().expect("/proc/meminfo has MemAvailable");
        let total = procfs::Meminfo::current().expect("meminfo").mem_total;
        assert!(
            available > 0 && available <= total,
            "{available} of {total}"
        );
    }
}
