//! The real cuBLAS's definitions of the names this library exports, found
//! at a name's first call and kept: the definition this one shadows
//! (`dlsym(RTLD_NEXT)`), else the same name in a `libcublas` the process
//! has loaded privately (Python extensions and plugins open theirs
//! `RTLD_LOCAL`, out of `RTLD_NEXT`'s reach), else in
//! `FASTMM_CUBLAS_REAL` or the `libcublas.so` the loader finds. A
//! definition inside this library itself is never taken, so a misconfigured
//! process reports cuBLAS as missing rather than calling itself forever.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

const RTLD_NOW: c_int = 2;
const RTLD_LOCAL: c_int = 0;
const RTLD_NOLOAD: c_int = 4;
/// glibc's `RTLD_NEXT`.
const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

/// glibc's `struct dl_phdr_info`, as far as the name.
#[repr(C)]
struct PhdrInfo {
    addr: usize,
    name: *const c_char,
}

unsafe extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dl_iterate_phdr(
        callback: unsafe extern "C" fn(*mut PhdrInfo, usize, *mut c_void) -> c_int,
        data: *mut c_void,
    ) -> c_int;
}

/// The base address of the object `address` lies in.
fn object_of(address: usize) -> Option<usize> {
    fastmm::system::loaded_object(address).map(|object| object.base)
}

/// Whether `address` lies in this library.
fn is_ours(address: usize) -> bool {
    let here = object_of as fn(usize) -> Option<usize> as usize;
    object_of(address).is_some() && object_of(address) == object_of(here)
}

/// The paths of the loaded objects whose file name starts `libcublas.so`.
fn loaded_cublas() -> Vec<CString> {
    unsafe extern "C" fn visit(info: *mut PhdrInfo, _: usize, data: *mut c_void) -> c_int {
        // SAFETY: glibc passes a valid entry, and `data` is the vector
        // below, alive for the iteration.
        let (info, found) = unsafe { (&*info, &mut *data.cast::<Vec<CString>>()) };
        if !info.name.is_null() {
            // SAFETY: a NUL-terminated path owned by the loader.
            let path = unsafe { CStr::from_ptr(info.name) };
            let file = path
                .to_bytes()
                .rsplit(|&c| c == b'/')
                .next()
                .unwrap_or_default();
            if file.starts_with(b"libcublas.so") {
                found.push(path.to_owned());
            }
        }
        0
    }
    let mut found: Vec<CString> = Vec::new();
    // SAFETY: the callback only reads the entries and appends to `found`.
    unsafe { dl_iterate_phdr(visit, (&mut found as *mut Vec<CString>).cast()) };
    found
}

/// `name`'s definition in the library opened (or, with `RTLD_NOLOAD`,
/// found already open) at `path`, unless it is ours.
fn in_library(path: &CStr, flags: c_int, name: &CStr) -> Option<usize> {
    // SAFETY: a NUL-terminated path; a library already loaded is only
    // referenced, one loaded anew runs its initialisers as any would.
    let handle = unsafe { dlopen(path.as_ptr(), flags) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: a handle dlopen returned and a NUL-terminated name.
    let address = unsafe { dlsym(handle, name.as_ptr()) } as usize;
    (address != 0 && !is_ours(address)).then_some(address)
}

/// Finds `name`'s real definition (see the module's text).
fn find(name: &CStr) -> Option<usize> {
    // SAFETY: RTLD_NEXT and a NUL-terminated name.
    let next = unsafe { dlsym(RTLD_NEXT, name.as_ptr()) } as usize;
    if next != 0 && !is_ours(next) {
        return Some(next);
    }
    for path in loaded_cublas() {
        if let Some(address) = in_library(&path, RTLD_NOW | RTLD_NOLOAD, name) {
            return Some(address);
        }
    }
    let configured = std::env::var("FASTMM_CUBLAS_REAL").ok();
    let paths = configured
        .into_iter()
        .chain(["libcublas.so.13".into(), "libcublas.so.12".into()]);
    paths
        .filter_map(|p| CString::new(p).ok())
        .find_map(|p| in_library(&p, RTLD_NOW | RTLD_LOCAL, name))
}

/// `name`'s real definition, looked up at the first call through `slot`
/// (one per name, kept by its caller) and kept there; None where no
/// cuBLAS defines it.
pub fn definition(slot: &'static OnceLock<Option<usize>>, name: &CStr) -> Option<usize> {
    *slot.get_or_init(|| find(name))
}
