//! Every other BLAS symbol, forwarded: the reference BLAS's Fortran
//! routines and CBLAS's functions other than the GEMMs this library runs,
//! so that it can stand in for a whole `libblas.so.3` (Debian's
//! alternative, which LAPACK, numpy and R link) and, preloaded or linked
//! first, still leave a program's other BLAS calls to the library it
//! would have used.
//!
//! Each symbol is a trampoline that jumps through a slot of a table: no
//! argument register (integer, vector or stack) is touched, so one
//! trampoline serves every signature, complex returns included. A slot
//! is filled at the symbol's first call, by a stub that saves the
//! argument registers, finds the definition and jumps to it — nothing is
//! opened in a process that never calls a forwarded routine (a library
//! opened at load would start, say, OpenBLAS's threads in every preloaded
//! process). The definition is the first found in:
//! 1. `FASTMM_BLAS_FALLBACK`, a library path (opened `RTLD_LOCAL`);
//! 2. the definition this library shadows (`dlsym(RTLD_NEXT)`): the BLAS
//!    a preloaded or first-linked copy sits in front of;
//! 3. the BLAS libraries Debian installs behind the alternative
//!    ([`DEFAULT_FALLBACKS`], OpenBLAS first, as the alternative's
//!    priorities rank them), opened one at a time while a name is
//!    missing.
//!
//! A definition in any copy of this library (this one, or another build
//! preloaded, linked or installed over a fallback's path) is passed over,
//! so that two copies never forward to each other. A symbol none of them defines
//! reaches a handler that names it and ends the process: a BLAS routine
//! cannot report an error to its caller.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Libraries tried after the shadowed definition: OpenBLAS and the
/// reference BLAS where Debian's `libopenblas0-*` and `libblas3` put
/// them, in the alternative's order of priority.
pub const DEFAULT_FALLBACKS: [&str; 4] = [
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
    "/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3",
    "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3",
    "/usr/lib/x86_64-linux-gnu/atlas/libblas.so.3",
];

const RTLD_NOW: c_int = 2;
const RTLD_LOCAL: c_int = 0;
/// glibc's `RTLD_NEXT`: the definitions after the calling object's.
const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

const RTLD_NOLOAD: c_int = 4;

unsafe extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *mut c_char;
}

/// Whether `address` lies in a copy of this library (this one or another
/// build, preloaded, linked or installed as a fallback): its object
/// exports [`fastmm_blas_forwarded`]. Two copies forwarding to each
/// other would jump back and forth forever.
fn in_a_copy_of_this_library(address: usize) -> bool {
    let Some(object) = fastmm::system::loaded_object(address) else {
        return false;
    };
    // SAFETY: the object is loaded (its address was just resolved), so
    // RTLD_NOLOAD returns its handle without loading anything; the name
    // is NUL-terminated.
    let handle = unsafe { dlopen(object.path.as_ptr(), RTLD_NOW | RTLD_NOLOAD) };
    if handle.is_null() {
        return false;
    }
    // SAFETY: a live handle and a NUL-terminated name.
    !unsafe { dlsym(handle, c"fastmm_blas_forwarded".as_ptr()) }.is_null()
}

/// Defines the trampolines of `names`, [`FORWARDED`] (their names, in
/// slot order) and [`SLOTS`].
macro_rules! forwards {
    ($($name:ident)*) => {
        /// The forwarded symbols, in slot order.
        pub const FORWARDED: &[&str] = &[$(stringify!($name)),*];

        /// This library's own trampolines, in slot order: a fallback that
        /// resolves a name to one of them is this library again (a copy
        /// installed over the fallback's path) and must not be used.
        fn own_addresses() -> Vec<usize> {
            vec![$($name as extern "C" fn() as usize),*]
        }

        $(
            #[doc = concat!("`", stringify!($name), "`, forwarded (see the module's documentation).")]
            #[unsafe(no_mangle)]
            #[unsafe(naked)]
            pub extern "C" fn $name() {
                // Loads the slot into r11 (scratch in the System V ABI,
                // never an argument) and jumps there with every argument
                // as the caller left it; an empty slot goes to the
                // resolving stub with the slot's index in r11.
                core::arch::naked_asm!(
                    "mov r11, qword ptr [rip + {slots} + {offset}]",
                    "test r11, r11",
                    "jz 2f",
                    "jmp r11",
                    "2:",
                    "mov r11d, {index}",
                    "jmp {first_call}",
                    slots = sym SLOTS,
                    offset = const 8 * slot(stringify!($name)),
                    index = const slot(stringify!($name)),
                    first_call = sym first_call,
                )
            }
        )*
    };
}

/// The index of `name` in [`FORWARDED`], at compile time.
const fn slot(name: &str) -> usize {
    let mut i = 0;
    while i < FORWARDED.len() {
        if same(FORWARDED[i].as_bytes(), name.as_bytes()) {
            return i;
        }
        i += 1;
    }
    panic!("a forwarded name without a slot");
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The address each trampoline jumps to (0 until its first call).
static SLOTS: [AtomicUsize; FORWARDED.len()] = [const { AtomicUsize::new(0) }; FORWARDED.len()];

/// A forwarded symbol that no library defines: named, then the process
/// ends (the routine's caller has no error to receive).
fn missing(index: usize) -> ! {
    let name = FORWARDED.get(index).copied().unwrap_or("?");
    eprintln!(
        "libfastmm_blas: {name} is not in fastmm and no BLAS to forward it to was found \
         (set FASTMM_BLAS_FALLBACK to a BLAS library, e.g. {})",
        DEFAULT_FALLBACKS[2]
    );
    std::process::abort()
}

/// The first call of a forwarded symbol whose slot is empty: r11 holds the
/// slot's index, every argument register and the stack are the caller's.
/// Saves the integer argument registers, rax (a variadic call's vector
/// count) and xmm0–7, asks [`resolve_slot`] for the definition, restores
/// them and jumps there, so the definition sees the call as made.
#[unsafe(naked)]
extern "C" fn first_call() {
    core::arch::naked_asm!(
        // Entry: rsp ≡ 8 (mod 16). Seven pushes make it ≡ 0, and the
        // 128 bytes of vector registers keep it so for the call.
        "push rdi",
        "push rsi",
        "push rdx",
        "push rcx",
        "push r8",
        "push r9",
        "push rax",
        "sub rsp, 128",
        "movdqu xmmword ptr [rsp], xmm0",
        "movdqu xmmword ptr [rsp + 16], xmm1",
        "movdqu xmmword ptr [rsp + 32], xmm2",
        "movdqu xmmword ptr [rsp + 48], xmm3",
        "movdqu xmmword ptr [rsp + 64], xmm4",
        "movdqu xmmword ptr [rsp + 80], xmm5",
        "movdqu xmmword ptr [rsp + 96], xmm6",
        "movdqu xmmword ptr [rsp + 112], xmm7",
        "mov rdi, r11",
        "call {resolve}",
        "mov r11, rax",
        "movdqu xmm0, xmmword ptr [rsp]",
        "movdqu xmm1, xmmword ptr [rsp + 16]",
        "movdqu xmm2, xmmword ptr [rsp + 32]",
        "movdqu xmm3, xmmword ptr [rsp + 48]",
        "movdqu xmm4, xmmword ptr [rsp + 64]",
        "movdqu xmm5, xmmword ptr [rsp + 80]",
        "movdqu xmm6, xmmword ptr [rsp + 96]",
        "movdqu xmm7, xmmword ptr [rsp + 112]",
        "add rsp, 128",
        "pop rax",
        "pop r9",
        "pop r8",
        "pop rcx",
        "pop rdx",
        "pop rsi",
        "pop rdi",
        "jmp r11",
        resolve = sym resolve_slot,
    )
}

/// The definition of slot `index`, found and kept (see the module's
/// order); a name no library defines ends the process.
extern "C" fn resolve_slot(index: usize) -> usize {
    // A panic must not unwind into the assembly; a failure to resolve is
    // `missing` either way.
    let found = std::panic::catch_unwind(|| {
        let mut fallbacks = locked(fallbacks());
        fallbacks.find(index)
    });
    match found {
        Ok(Some(address)) => {
            SLOTS[index].store(address, Ordering::Release);
            address
        }
        _ => missing(index),
    }
}

/// The libraries searched so far, opened on demand and kept for the
/// process.
struct Fallbacks {
    /// (what it is, its handle); `RTLD_NEXT` stands for the shadowed BLAS.
    handles: Vec<(String, *mut c_void)>,
    /// The next of [`DEFAULT_FALLBACKS`] to open.
    next_default: usize,
    /// This library's trampolines, by slot.
    own: Vec<usize>,
}

// SAFETY: the handles are dlopen's, valid on any thread for the process's
// life (never closed); the structure is reached under its mutex only.
unsafe impl Send for Fallbacks {}

fn fallbacks() -> &'static std::sync::Mutex<Fallbacks> {
    static FALLBACKS: std::sync::OnceLock<std::sync::Mutex<Fallbacks>> = std::sync::OnceLock::new();
    FALLBACKS.get_or_init(|| {
        let mut handles = Vec::new();
        let named = std::env::var("FASTMM_BLAS_FALLBACK")
            .ok()
            .filter(|p| !p.is_empty());
        if let Some(path) = named {
            match open(&path) {
                Some(handle) => handles.push((path, handle)),
                None => eprintln!(
                    "libfastmm_blas: FASTMM_BLAS_FALLBACK={path} cannot be opened: {}",
                    last_error()
                ),
            }
        }
        handles.push(("the shadowed BLAS".into(), RTLD_NEXT));
        std::sync::Mutex::new(Fallbacks {
            handles,
            next_default: 0,
            own: own_addresses(),
        })
    })
}

fn locked<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Fallbacks {
    /// Slot `index`'s definition: from the libraries opened so far, else
    /// from the next defaults, opened one at a time.
    fn find(&mut self, index: usize) -> Option<usize> {
        let symbol = CString::new(*FORWARDED.get(index)?).ok()?;
        loop {
            if let Some((address, _)) = find(&self.handles, &symbol, self.own[index]) {
                return Some(address);
            }
            let path = DEFAULT_FALLBACKS.get(self.next_default)?;
            self.next_default += 1;
            if let Some(handle) = open(path) {
                self.handles.push((path.to_string(), handle));
            }
        }
    }
}

/// The first of `handles` that defines `symbol` outside every copy of
/// this library (`own` is this copy's trampoline): its address and index.
fn find(handles: &[(String, *mut c_void)], symbol: &CStr, own: usize) -> Option<(usize, usize)> {
    handles.iter().enumerate().find_map(|(i, (_, handle))| {
        // SAFETY: a handle from dlopen (kept open for the process) or
        // RTLD_NEXT, and a NUL-terminated name.
        let address = unsafe { dlsym(*handle, symbol.as_ptr()) } as usize;
        (address != 0 && address != own && !in_a_copy_of_this_library(address))
            .then_some((address, i))
    })
}

/// `path` opened for its symbols alone (RTLD_LOCAL: they do not join the
/// global scope, where this library's own definitions stay first).
fn open(path: &str) -> Option<*mut c_void> {
    let path = CString::new(path).ok()?;
    // SAFETY: a NUL-terminated path; the handle is never closed.
    let handle = unsafe { dlopen(path.as_ptr(), RTLD_NOW | RTLD_LOCAL) };
    (!handle.is_null()).then_some(handle)
}

/// dlerror's message, or a placeholder.
fn last_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string that stays
    // valid until the next dl call on this thread, copied at once.
    let text = unsafe { dlerror() };
    if text.is_null() {
        return "unknown error".into();
    }
    // SAFETY: non-null, NUL-terminated (above).
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// How many forwarded symbols have a definition, finding every one that
/// is not yet (so the fallback libraries are opened here if no call has
/// opened them).
pub fn resolved() -> usize {
    let mut fallbacks = locked(fallbacks());
    (0..FORWARDED.len())
        .filter(|&i| {
            if SLOTS[i].load(Ordering::Acquire) != 0 {
                return true;
            }
            match fallbacks.find(i) {
                Some(address) => {
                    SLOTS[i].store(address, Ordering::Release);
                    true
                }
                None => false,
            }
        })
        .count()
}

/// The libraries opened to forward to, by path, comma-separated ("" where
/// none was): for the tests.
pub fn sources() -> String {
    locked(fallbacks())
        .handles
        .iter()
        .filter(|(_, handle)| *handle != RTLD_NEXT)
        .map(|(what, _)| what.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// For programs and `fastmm.blas_status()`: how many of the other BLAS
/// symbols have a definition to forward to (of [`FORWARDED`]'s).
#[unsafe(no_mangle)]
pub extern "C" fn fastmm_blas_forwarded() -> usize {
    resolved()
}

forwards! {
    // Level 1.
    srotg_ drotg_ crotg_ zrotg_ srotmg_ drotmg_ srot_ drot_ srotm_ drotm_ csrot_ zdrot_
    sswap_ dswap_ cswap_ zswap_ sscal_ dscal_ cscal_ zscal_ csscal_ zdscal_
    scopy_ dcopy_ ccopy_ zcopy_ saxpy_ daxpy_ caxpy_ zaxpy_
    sdot_ ddot_ sdsdot_ dsdot_ cdotu_ cdotc_ zdotu_ zdotc_
    snrm2_ dnrm2_ scnrm2_ dznrm2_ sasum_ dasum_ scasum_ dzasum_
    isamax_ idamax_ icamax_ izamax_ scabs1_ dcabs1_
    // Level 2.
    sgemv_ dgemv_ cgemv_ zgemv_ sgbmv_ dgbmv_ cgbmv_ zgbmv_
    chemv_ zhemv_ chbmv_ zhbmv_ chpmv_ zhpmv_ ssymv_ dsymv_ ssbmv_ dsbmv_ sspmv_ dspmv_
    strmv_ dtrmv_ ctrmv_ ztrmv_ stbmv_ dtbmv_ ctbmv_ ztbmv_ stpmv_ dtpmv_ ctpmv_ ztpmv_
    strsv_ dtrsv_ ctrsv_ ztrsv_ stbsv_ dtbsv_ ctbsv_ ztbsv_ stpsv_ dtpsv_ ctpsv_ ztpsv_
    sger_ dger_ cgeru_ cgerc_ zgeru_ zgerc_ cher_ zher_ chpr_ zhpr_ cher2_ zher2_ chpr2_ zhpr2_
    ssyr_ dsyr_ sspr_ dspr_ ssyr2_ dsyr2_ sspr2_ dspr2_
    // Level 3 but GEMM.
    ssymm_ dsymm_ csymm_ zsymm_ chemm_ zhemm_ ssyrk_ dsyrk_ csyrk_ zsyrk_ cherk_ zherk_
    ssyr2k_ dsyr2k_ csyr2k_ zsyr2k_ cher2k_ zher2k_
    strmm_ dtrmm_ ctrmm_ ztrmm_ strsm_ dtrsm_ ctrsm_ ztrsm_
    // The reference BLAS's helpers, which LAPACK calls too.
    lsame_ xerbla_ xerbla_array_
    // The subroutine forms of the functions, which reference CBLAS calls.
    sdotsub_ ddotsub_ dsdotsub_ sdsdotsub_ cdotusub_ cdotcsub_ zdotusub_ zdotcsub_
    snrm2sub_ dnrm2sub_ scnrm2sub_ dznrm2sub_ sasumsub_ dasumsub_ scasumsub_ dzasumsub_
    isamaxsub_ idamaxsub_ icamaxsub_ izamaxsub_ scabs1sub_ dcabs1sub_
    // CBLAS, level 1.
    cblas_sdsdot cblas_dsdot cblas_sdot cblas_ddot
    cblas_cdotu_sub cblas_cdotc_sub cblas_zdotu_sub cblas_zdotc_sub
    cblas_snrm2 cblas_sasum cblas_dnrm2 cblas_dasum cblas_scnrm2 cblas_scasum cblas_dznrm2 cblas_dzasum
    cblas_isamax cblas_idamax cblas_icamax cblas_izamax
    cblas_sswap cblas_scopy cblas_saxpy cblas_dswap cblas_dcopy cblas_daxpy
    cblas_cswap cblas_ccopy cblas_caxpy cblas_zswap cblas_zcopy cblas_zaxpy
    cblas_srotg cblas_srotmg cblas_srot cblas_srotm cblas_drotg cblas_drotmg cblas_drot cblas_drotm
    cblas_crotg cblas_zrotg cblas_csrot cblas_zdrot
    cblas_sscal cblas_dscal cblas_cscal cblas_zscal cblas_csscal cblas_zdscal
    cblas_scabs1 cblas_dcabs1
    // CBLAS, level 2.
    cblas_sgemv cblas_sgbmv cblas_strmv cblas_stbmv cblas_stpmv cblas_strsv cblas_stbsv cblas_stpsv
    cblas_dgemv cblas_dgbmv cblas_dtrmv cblas_dtbmv cblas_dtpmv cblas_dtrsv cblas_dtbsv cblas_dtpsv
    cblas_cgemv cblas_cgbmv cblas_ctrmv cblas_ctbmv cblas_ctpmv cblas_ctrsv cblas_ctbsv cblas_ctpsv
    cblas_zgemv cblas_zgbmv cblas_ztrmv cblas_ztbmv cblas_ztpmv cblas_ztrsv cblas_ztbsv cblas_ztpsv
    cblas_ssymv cblas_ssbmv cblas_sspmv cblas_sger cblas_ssyr cblas_sspr cblas_ssyr2 cblas_sspr2
    cblas_dsymv cblas_dsbmv cblas_dspmv cblas_dger cblas_dsyr cblas_dspr cblas_dsyr2 cblas_dspr2
    cblas_chemv cblas_chbmv cblas_chpmv cblas_cgeru cblas_cgerc cblas_cher cblas_chpr cblas_cher2 cblas_chpr2
    cblas_zhemv cblas_zhbmv cblas_zhpmv cblas_zgeru cblas_zgerc cblas_zher cblas_zhpr cblas_zher2 cblas_zhpr2
    // CBLAS, level 3 but GEMM.
    cblas_ssymm cblas_ssyrk cblas_ssyr2k cblas_strmm cblas_strsm
    cblas_dsymm cblas_dsyrk cblas_dsyr2k cblas_dtrmm cblas_dtrsm
    cblas_csymm cblas_csyrk cblas_csyr2k cblas_ctrmm cblas_ctrsm
    cblas_zsymm cblas_zsyrk cblas_zsyr2k cblas_ztrmm cblas_ztrsm
    cblas_chemm cblas_cherk cblas_cher2k cblas_zhemm cblas_zherk cblas_zher2k
    cblas_xerbla
}
