//! Facts about the machine, read when asked (the costly ones once): the CPU
//! model, its hardware threads and caches, and the memory available.

use std::fs;
use std::sync::OnceLock;

use crate::tunables::L3_PER_CPU_MAX;

/// The CPU model string, e.g. "AMD EPYC 9454P 48-Core Processor".
pub fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Memory the OS could give this process without swapping (`MemAvailable`
/// of /proc/meminfo), in bytes; `None` where the OS does not say.
pub fn available_memory_bytes() -> Option<u64> {
    let info = fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// `Err(Error::OutOfMemory)` when `bytes` for `what` exceed the memory
/// available now ([`available_memory_bytes`]); `Ok` where the OS does
/// not say. For checking before a large allocation, which Linux would
/// otherwise grant and later fail at first touch.
pub fn check_allocation(what: &str, bytes: u128) -> Result<(), crate::error::Error> {
    match available_memory_bytes() {
        Some(available) if bytes > u128::from(available) => Err(crate::error::Error::OutOfMemory {
            what: what.to_string(),
            needed: format_bytes(bytes),
            available: format_bytes(u128::from(available)),
        }),
        _ => Ok(()),
    }
}

/// Formats a byte count with a binary unit: "1.5 GiB".
pub fn format_bytes(bytes: u128) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Number of hardware threads the OS lets this process use (at least 1).
/// Asked once: the answer reads cgroup files, which costs tens of µs.
pub fn available_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Data cache sizes in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSizes {
    /// Level-1 data cache of one core.
    pub l1d: usize,
    /// Level-2 cache of one core.
    pub l2: usize,
    /// The share of the last-level cache the blocks are planned for: its
    /// size, but at most 8 MiB (`L3_PER_CPU_MAX`) for each CPU the OS says
    /// shares it.
    pub l3: usize,
    /// The last-level cache's size as the OS gives it.
    pub l3_total: usize,
}

/// Sizes assumed where the OS does not say (a common x86-64 core).
const FALLBACK_CACHES: CacheSizes = CacheSizes {
    l1d: 32 * 1024,
    l2: 512 * 1024,
    l3: 8 * 1024 * 1024,
    l3_total: 8 * 1024 * 1024,
};

/// The cache sizes of CPU 0, read once.
pub fn cache_sizes() -> CacheSizes {
    static CACHES: OnceLock<CacheSizes> = OnceLock::new();
    *CACHES.get_or_init(|| read_sysfs_caches().unwrap_or(FALLBACK_CACHES))
}

fn read_sysfs_caches() -> Option<CacheSizes> {
    let mut sizes = FALLBACK_CACHES;
    let mut found = false;
    for index in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
        let Ok(level) = fs::read_to_string(format!("{dir}/level")) else {
            continue;
        };
        let kind = fs::read_to_string(format!("{dir}/type")).unwrap_or_default();
        let Some(bytes) = fs::read_to_string(format!("{dir}/size"))
            .ok()
            .and_then(|s| parse_size(&s))
        else {
            continue;
        };
        match (level.trim(), kind.trim()) {
            ("1", "Data") => sizes.l1d = bytes,
            ("2", _) => sizes.l2 = bytes,
            ("3", _) => {
                let sharing = fs::read_to_string(format!("{dir}/shared_cpu_list"))
                    .ok()
                    .and_then(|list| count_cpus(&list))
                    .unwrap_or_else(available_threads);
                sizes.l3_total = bytes;
                sizes.l3 = bytes.min(L3_PER_CPU_MAX.saturating_mul(sharing));
            }
            _ => continue,
        }
        found = true;
    }
    found.then_some(sizes)
}

/// The number of CPUs in a sysfs CPU list such as "0-1" or "0,2,8-11".
fn count_cpus(list: &str) -> Option<usize> {
    let mut count = 0usize;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        count += match part.split_once('-') {
            Some((first, last)) => {
                let (first, last): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
                last.checked_sub(first)? + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    (count > 0).then_some(count)
}

/// Parses sysfs sizes such as "48K" or "2048K" or "32M".
fn parse_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let value: usize = digits.parse().ok()?;
    match unit {
        "" => Some(value),
        "K" => value.checked_mul(1024),
        "M" => value.checked_mul(1024 * 1024),
        "G" => value.checked_mul(1024 * 1024 * 1024),
        _ => None,
    }
}

/// What a GPU is and what it allows, read once when it is opened.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GpuInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: usize,
    /// Device memory in bytes.
    pub total_memory: usize,
    /// Most threads in one block.
    pub max_threads_per_block: usize,
    /// Static shared memory one block may use, in bytes.
    pub max_shared_per_block: usize,
    /// Shared memory one block may use when its kernel opts in to more
    /// than the static limit (dynamic shared memory), in bytes.
    pub max_shared_per_block_optin: usize,
    /// Largest grid extent in y.
    pub max_grid_y: usize,
    /// Whether the device supports managed (unified) memory.
    pub managed_memory: bool,
    /// CUDA driver version, e.g. 13000.
    pub driver_version: i32,
}

/// A loaded shared object (or the executable), as the dynamic loader
/// knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedObject {
    /// The address it is loaded at.
    pub base: usize,
    /// Its path, as the loader opened it.
    pub path: std::ffi::CString,
}

/// The object that `address` (of code or data) lies in: for a drop-in
/// library that must tell its own definitions, or another copy's, from
/// the library it stands in for. None where the loader knows none.
#[cfg(target_os = "linux")]
pub fn loaded_object(address: usize) -> Option<LoadedObject> {
    use std::ffi::{c_char, c_int, c_void, CStr};
    /// glibc's `Dl_info`.
    #[repr(C)]
    struct DlInfo {
        fname: *const c_char,
        fbase: *mut c_void,
        sname: *const c_char,
        saddr: *mut c_void,
    }
    unsafe extern "C" {
        fn dladdr(address: *const c_void, info: *mut DlInfo) -> c_int;
    }
    let mut info = DlInfo {
        fname: std::ptr::null(),
        fbase: std::ptr::null_mut(),
        sname: std::ptr::null(),
        saddr: std::ptr::null_mut(),
    };
    // SAFETY: an out-pointer to a local of glibc's layout.
    if unsafe { dladdr(address as *const c_void, &mut info) } == 0 || info.fname.is_null() {
        return None;
    }
    Some(LoadedObject {
        base: info.fbase as usize,
        // SAFETY: dladdr's NUL-terminated path, owned by the loader.
        path: unsafe { CStr::from_ptr(info.fname) }.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_sizes_parse() {
        assert_eq!(parse_size("48K\n"), Some(48 * 1024));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn sysfs_cpu_lists_count() {
        assert_eq!(count_cpus("0-1\n"), Some(2));
        assert_eq!(count_cpus("0,2,8-11"), Some(6));
        assert_eq!(count_cpus("7"), Some(1));
        assert_eq!(count_cpus(""), None);
        assert_eq!(count_cpus("3-1"), None);
        assert_eq!(count_cpus("a-b"), None);
    }

    #[test]
    fn bytes_print_with_a_binary_unit() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
    }
}
