//! What the library's products run with, read once from the environment:
//!
//! * `FASTMM_ACCURACY`: the accuracy level (default `native`: the
//!   digits of the product it replaces);
//! * `FASTMM_BLAS_ALGO`: the algorithm (default `auto`);
//! * `FASTMM_BLAS_DEVICE`: where the products run (default `cpu`: host
//!   operands, the CPU's executor).
//!
//! A value that does not parse is reported once on stderr and its default
//! used: a program that links a BLAS expects products, not a failure to
//! start.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use fastmm::{Context, GemmOptions, Machine};

/// The machine and options every product of this process runs with.
pub struct Settings {
    /// Where the products run.
    pub machine: Machine,
    /// The options they run with.
    pub opts: GemmOptions,
}

/// The settings, read from the environment on the first product.
pub fn get() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| from_values(&|name| std::env::var(name).ok()))
}

/// The settings from `var` (the environment, or a test's table).
pub fn from_values(var: &dyn Fn(&str) -> Option<String>) -> Settings {
    let opts = fastmm::config::front_end_options(var, "FASTMM_BLAS_ALGO", &warn);
    let machine = match var("FASTMM_BLAS_DEVICE") {
        None => Context::cpu().into(),
        Some(text) => Machine::open(&text).unwrap_or_else(|e| {
            warn(&format!("FASTMM_BLAS_DEVICE={text}: {e}; using the CPU"));
            Context::cpu().into()
        }),
    };
    Settings { machine, opts }
}

/// One line on stderr, as a BLAS reports what it cannot do.
pub(crate) fn warn(text: &str) {
    eprintln!("fastmm BLAS: {text}");
}

/// Products this library has run on fastmm (argument errors and quick
/// returns not counted).
static PRODUCTS: AtomicU64 = AtomicU64::new(0);

/// Counts one product run on fastmm.
pub(crate) fn count_product() {
    // A load and a store, not a locked add: the count says whether
    // products arrive here, and the locked add cost ~8 ns of a 60 ns
    // small zgemm_. Calls racing on several threads may count as one.
    PRODUCTS.store(
        PRODUCTS.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Relaxed,
    );
}

/// How many products this library has run on fastmm in this process:
/// what tells a program (`fastmm.blas_status()`, a test) that its BLAS
/// calls arrive here.
#[no_mangle]
pub extern "C" fn fastmm_blas_products() -> u64 {
    PRODUCTS.load(Ordering::Relaxed)
}
