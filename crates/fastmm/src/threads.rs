//! Thread pools, built once per thread count and reused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::ThreadPool;

use crate::error::Error;

/// Runs `f` inside a rayon pool of exactly `threads` workers. Pools are
/// cached, so only the first call with a given count pays for spawning.
pub fn run_in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> Result<R, Error> {
    if threads == 0 {
        return Err(Error::InvalidOption(
            "thread count must be at least 1".into(),
        ));
    }
    if rayon::current_thread_index().is_some() && rayon::current_num_threads() == threads {
        return Ok(f());
    }
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<ThreadPool>>>> = OnceLock::new();
    let pool = {
        let mut pools = POOLS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match pools.get(&threads) {
            Some(pool) => Arc::clone(pool),
            None => {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("fastmm-{i}"))
                    .build()
                    .map(Arc::new)
                    .map_err(|e| {
                        Error::InvalidOption(format!("cannot start {threads} threads: {e}"))
                    })?;
                pools.insert(threads, Arc::clone(&pool));
                pool
            }
        }
    };
    Ok(pool.install(f))
}
