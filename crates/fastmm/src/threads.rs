//! Threads: rayon pools for the work-stealing algorithms, and teams for
//! the packed product's fixed-size parallel regions.
//!
//! A [`Team`] of t members is the calling thread plus t − 1 helper
//! threads that stay alive between products. After a job a helper spins
//! for [`TEAM_SPIN`] waiting for the next one, then parks. So a run of
//! small products (the common case: many 256³ products in a loop) pays no
//! thread wake-up at all, and an isolated one pays one wake per helper;
//! a rayon pool entered from outside pays three (the pool's worker, the
//! second worker for the split, and the caller when the job ends), tens
//! of µs each on a VM, as long as a whole 256³ product on two cores.
//! This is what OpenBLAS's own threads do.
//!
//! A member's share of a job is claimed, not assigned: the caller and the
//! helpers take member indices from one counter, and the caller, once its
//! own share is done, takes every index no helper has started. So a helper
//! the scheduler has not run yet (its CPU held by another library's
//! spinning thread: OpenBLAS's idle workers beside numpy, an OpenMP team's)
//! never holds the caller up; it finds nothing left when it runs. The
//! caller waits only for shares a running helper took.
//!
//! A woken thread may land on its waker's CPU: on a VM an idle vCPU looks
//! preempted to the guest's scheduler, which then prefers the waker's, and
//! a caller and a helper that both keep running never get pulled apart
//! until the next load-balancing tick. Two members on one CPU run no
//! faster than one (each wait hands the CPU to the other: measured as a
//! two-thread 256³ product taking a one-thread product's time). So at
//! each job a helper on its caller's CPU moves itself to the next free
//! one ([`placement`]).

use std::any::Any;
use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use rayon::ThreadPool;

use crate::error::Error;
use crate::tunables::{SPIN_BEFORE_YIELD, TEAM_SPIN};

/// The process's thread count set by `set_num_threads` (0: none set).
static DEFAULT_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets (or with `None` clears) the process's default thread count.
pub(crate) fn set_default_threads(threads: Option<usize>) {
    DEFAULT_THREADS.store(threads.unwrap_or(0), Ordering::Relaxed);
}

/// The process's default thread count, when one was set.
pub(crate) fn default_threads() -> Option<usize> {
    match DEFAULT_THREADS.load(Ordering::Relaxed) {
        0 => None,
        threads => Some(threads),
    }
}

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

/// Calls `f(0)`, …, `f(members − 1)`, one call per member, on up to
/// `members` threads, and returns when all have returned (re-raising a
/// member's panic). On a free [`Team`] of that size when the caller is
/// not a rayon worker, else on rayon (the current pool, or the cached pool
/// of that size). Each member is taken by a thread that is running, so one
/// thread may run several members one after another (the caller takes the
/// members no helper has started). A member may wait for another member's
/// progress, since a member that waits is never run before one that it
/// waits for is taken: a thread takes a member only when it has finished
/// the one before.
pub(crate) fn for_each_member(members: usize, f: &(dyn Fn(usize) + Sync)) {
    if members <= 1 {
        f(0);
        return;
    }
    if rayon::current_thread_index().is_none() {
        if shared::run(members, f) {
            return;
        }
        if let Some(team) = Team::of(members) {
            if let Some(ran) = team.try_run(f) {
                if let Err(panic) = ran {
                    resume_unwind(panic);
                }
                return;
            }
        }
    }
    let on_rayon = || {
        use rayon::prelude::*;
        (0..members).into_par_iter().for_each(f);
    };
    if rayon::current_thread_index().is_some() {
        on_rayon();
    } else if run_in_pool(members, on_rayon).is_err() {
        // No threads could be started: the members one after another on
        // this thread is not possible when they wait for each other, so
        // this is the one unrecoverable case; it needs a machine that
        // cannot spawn a thread.
        panic!("cannot start {members} threads");
    }
}

/// Runs `f` on every member on this copy's own team of `members` threads:
/// `Some` with any member's panic, `None` where that team is busy or its
/// threads cannot be started. For a library that offers its team to the
/// other copies of fastmm in the process ([`shared`]).
pub fn run_on_own_team(
    members: usize,
    f: &(dyn Fn(usize) + Sync),
) -> Option<Result<(), Box<dyn Any + Send>>> {
    Team::of(members)?.try_run(f)
}

/// One team for the copies of fastmm in a process. A program may hold
/// several: the Python module carries one and `libfastmm_blas`, which
/// numpy's products reach, another. Each keeps its helpers spinning for
/// `TEAM_SPIN` (200 µs) after a product, so a product of one copy right after
/// one of the other shared the CPUs with the other's spinning helpers
/// (a 256³ product took up to 1.6× its time). A copy whose symbols are
/// global (`libfastmm_blas`, preloaded or linked) exports
/// [`shared::SYMBOL`]; every copy looks it up once and runs its parallel
/// regions there, on one set of threads.
pub mod shared {
    use std::any::Any;
    use std::ffi::{c_int, c_void};
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::{Mutex, OnceLock};

    /// The exported C function: `int fastmm_shared_team_v1(size_t members,
    /// void (*job)(void *data, size_t member), void *data)` runs
    /// `job(data, m)` for every member m on the exporter's team and
    /// returns 1, or returns 0 without running any where that team is busy
    /// or cannot start.
    pub const SYMBOL: &str = "fastmm_shared_team_v1";

    /// The exported function's type.
    pub type Runner =
        unsafe extern "C" fn(usize, extern "C" fn(*mut c_void, usize), *mut c_void) -> c_int;

    unsafe extern "C" {
        fn dlsym(handle: *mut c_void, symbol: *const std::ffi::c_char) -> *mut c_void;
    }

    /// The process's shared team, looked up once (glibc's RTLD_DEFAULT:
    /// the global scope).
    fn runner() -> Option<Runner> {
        static FOUND: OnceLock<Option<Runner>> = OnceLock::new();
        *FOUND.get_or_init(|| {
            if !cfg!(target_os = "linux") {
                return None;
            }
            let name = std::ffi::CString::new(SYMBOL).ok()?;
            // SAFETY: RTLD_DEFAULT (null) and a NUL-terminated name.
            let address = unsafe { dlsym(std::ptr::null_mut(), name.as_ptr()) };
            // SAFETY: a symbol of this name is the function of `Runner`'s
            // type (the protocol's version is in its name).
            (!address.is_null())
                .then(|| unsafe { std::mem::transmute::<*mut c_void, Runner>(address) })
        })
    }

    /// What a member call needs across the C boundary: the members' work
    /// and the first panic, kept here rather than unwound through C.
    struct Job<'a> {
        f: &'a (dyn Fn(usize) + Sync),
        panic: Mutex<Option<Box<dyn Any + Send>>>,
    }

    extern "C" fn member(data: *mut c_void, m: usize) {
        // SAFETY: `data` is the `Job` of the `run` call that is waiting
        // for this member, alive until every member has returned.
        let job = unsafe { &*(data as *const Job<'_>) };
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| (job.f)(m))) {
            super::lock(&job.panic).get_or_insert(panic);
        }
    }

    /// Runs `f` on every member on the process's shared team: `true` when
    /// it ran (a member's panic re-raised here), `false` where there is
    /// none or it is busy.
    pub(crate) fn run(members: usize, f: &(dyn Fn(usize) + Sync)) -> bool {
        let Some(runner) = runner() else {
            return false;
        };
        let job = Job {
            f,
            panic: Mutex::new(None),
        };
        let data = &job as *const Job<'_> as *mut c_void;
        // SAFETY: the protocol's function, with a callback that never
        // unwinds and data that outlives the call.
        let ran = unsafe { runner(members, member, data) } != 0;
        if let Some(panic) = super::lock(&job.panic).take() {
            std::panic::resume_unwind(panic);
        }
        ran
    }
}

/// `members` bands of `total` items as (start, length), in order, as even
/// as they go (the later bands the longer by one): each member's share of
/// a [`for_each_member`] call that cuts its work by columns.
pub(crate) fn even_bands(total: usize, members: usize) -> impl Iterator<Item = (usize, usize)> {
    let members = members.max(1);
    (0..members).map(move |t| {
        let start = total * t / members;
        (start, total * (t + 1) / members - start)
    })
}

/// Values handed out one per member of a [`for_each_member`] call: member
/// t takes the t-th, once (a team's members share the job by reference,
/// so each member's exclusive part of the work travels through here).
pub(crate) struct Shares<T>(Vec<Mutex<Option<T>>>);

impl<T> Shares<T> {
    pub(crate) fn new(values: impl IntoIterator<Item = T>) -> Shares<T> {
        Shares(values.into_iter().map(|v| Mutex::new(Some(v))).collect())
    }

    /// The t-th value, the first time it is asked for.
    pub(crate) fn take(&self, t: usize) -> Option<T> {
        self.0.get(t).and_then(|share| lock(share).take())
    }
}

/// The calling thread and `members − 1` helpers, running one job at a time.
pub(crate) struct Team {
    shared: Arc<Shared>,
    /// Held by the caller for the length of a job; a second caller (or a
    /// job that calls back in) finds it taken and runs on rayon instead.
    busy: Mutex<()>,
}

/// What the caller and the helpers share.
struct Shared {
    /// The current job: a `*const (dyn Fn(usize) + Sync)`, valid until
    /// `done` counts every member (the caller waits for that before
    /// returning).
    job: Mutex<Option<JobPtr>>,
    /// Bumped once per job; helpers look for members to take once per
    /// generation.
    generation: AtomicU64,
    /// The members' counter: the generation's low 32 bits above the index
    /// of the next member to take. A thread takes member i by moving it
    /// from (generation, i) to (generation, i + 1), so a helper that wakes
    /// after its generation's members are all taken takes none, and none
    /// of a later job.
    claim: AtomicU64,
    /// Members of the current job that have returned.
    done: AtomicUsize,
    /// The team's size (the caller and the helpers).
    members: usize,
    /// A helper's panic, for the caller to re-raise.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// Per helper: parked (or about to park), so the caller must wake it.
    asleep: Vec<AtomicBool>,
    /// Per helper: its thread, for unparking.
    threads: OnceLock<Vec<Thread>>,
    /// The CPU the caller published the current job from.
    caller_cpu: std::sync::atomic::AtomicIsize,
}

/// The job's address, sent to the helpers.
#[derive(Clone, Copy)]
struct JobPtr(*const (dyn Fn(usize) + Sync));

// SAFETY: the pointee is `Sync`, and the caller keeps it alive until every
// helper is done with it (see `Team::try_run`).
unsafe impl Send for JobPtr {}

impl Team {
    /// The cached team of `members` (started on first use), or `None`
    /// when its threads cannot be started.
    fn of(members: usize) -> Option<Arc<Team>> {
        static TEAMS: OnceLock<Mutex<HashMap<usize, Option<Arc<Team>>>>> = OnceLock::new();
        let mut teams = TEAMS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        teams
            .entry(members)
            .or_insert_with(|| Team::start(members).map(Arc::new))
            .clone()
    }

    fn start(members: usize) -> Option<Team> {
        let shared = Arc::new(Shared::new(members));
        let mut threads = Vec::with_capacity(members - 1);
        for index in 0..members - 1 {
            let shared = Arc::clone(&shared);
            let handle = std::thread::Builder::new()
                .name(format!("fastmm-team-{}", index + 1))
                .spawn(move || helper(&shared, index))
                .ok()?;
            threads.push(handle.thread().clone());
        }
        let _ = shared.threads.set(threads);
        Some(Team {
            shared,
            busy: Mutex::new(()),
        })
    }

    /// Runs `f` on every member, or returns `None` when the team is busy.
    fn try_run(&self, f: &(dyn Fn(usize) + Sync)) -> Option<Result<(), Box<dyn Any + Send>>> {
        let _busy = self.busy.try_lock().ok()?;
        let shared = &*self.shared;
        // SAFETY (of the lifetime erasure): `f` outlives this call, and this
        // call does not return (nor unwind: every member the caller runs
        // runs under catch_unwind) before `done` counts every member, that
        // is before every helper that took one has finished with the
        // pointer; a helper that took none never reads it (`Shared::take`).
        let job: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(f) };
        *lock(&shared.job) = Some(JobPtr(job));
        shared
            .caller_cpu
            .store(placement::current_cpu(), Ordering::SeqCst);
        shared.done.store(0, Ordering::SeqCst);
        let generation = shared.generation.load(Ordering::SeqCst) + 1;
        // Member 0 is the caller's.
        shared
            .claim
            .store(Shared::claim_word(generation, 1), Ordering::SeqCst);
        shared.generation.store(generation, Ordering::SeqCst);
        if let Some(threads) = shared.threads.get() {
            for (asleep, thread) in shared.asleep.iter().zip(threads) {
                if asleep.swap(false, Ordering::SeqCst) {
                    thread.unpark();
                }
            }
        }
        shared.run_member(f, 0);
        // The members no helper has taken yet: the caller's now.
        while let Some(member) = shared.take(generation) {
            shared.run_member(f, member);
        }
        wait_until(|| shared.done.load(Ordering::Acquire) == shared.members);
        *lock(&shared.job) = None;
        Some(match lock(&shared.panic).take() {
            Some(panic) => Err(panic),
            None => Ok(()),
        })
    }
}

impl Shared {
    /// The shared state of a team of `members` (helpers not started).
    fn new(members: usize) -> Shared {
        Shared {
            job: Mutex::new(None),
            generation: AtomicU64::new(0),
            claim: AtomicU64::new(0),
            done: AtomicUsize::new(0),
            members,
            panic: Mutex::new(None),
            asleep: (0..members - 1).map(|_| AtomicBool::new(false)).collect(),
            threads: OnceLock::new(),
            caller_cpu: std::sync::atomic::AtomicIsize::new(-1),
        }
    }

    fn claim_word(generation: u64, next: usize) -> u64 {
        (generation << 32) | next as u64
    }

    /// Takes the next member of `generation`'s job, if that job is still
    /// the current one and has a member left.
    fn take(&self, generation: u64) -> Option<usize> {
        let mut word = self.claim.load(Ordering::Acquire);
        loop {
            let next = (word & u64::from(u32::MAX)) as usize;
            if word >> 32 != generation & u64::from(u32::MAX) || next >= self.members {
                return None;
            }
            match self.claim.compare_exchange_weak(
                word,
                word + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(next),
                Err(now) => word = now,
            }
        }
    }

    /// Runs member `member` of `f` and counts it done; a panic is kept for
    /// the caller (the first one).
    fn run_member(&self, f: &(dyn Fn(usize) + Sync), member: usize) {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| f(member))) {
            lock(&self.panic).get_or_insert(panic);
        }
        self.done.fetch_add(1, Ordering::Release);
    }
}

/// A helper's life: wait for a new generation (spinning for
/// [`TEAM_SPIN`], then parked), take and run its members while any are
/// left.
fn helper(shared: &Shared, index: usize) {
    let mut seen = 0u64;
    loop {
        let started = Instant::now();
        while shared.generation.load(Ordering::Acquire) == seen {
            if started.elapsed() < TEAM_SPIN {
                // Yield rather than spin: if the scheduler has put this
                // helper on the caller's CPU, the caller runs meanwhile.
                std::thread::yield_now();
                continue;
            }
            // Say so before the last check, so that a caller publishing
            // after this check sees the flag and unparks (the park token
            // covers an unpark that comes before the park).
            shared.asleep[index].store(true, Ordering::SeqCst);
            if shared.generation.load(Ordering::SeqCst) != seen {
                shared.asleep[index].store(false, Ordering::SeqCst);
                break;
            }
            std::thread::park_timeout(Duration::from_secs(1));
        }
        seen = shared.generation.load(Ordering::Acquire);
        // Off the caller's CPU before looking for a member, not only after
        // taking one: a helper that shares the caller's CPU runs only when
        // the caller pauses, so it would find every member taken, never
        // move, and go on taking half of the caller's time while it waits
        // for the next job (a two-member product ran at one thread's speed
        // for thousands of calls that way).
        placement::step_aside(shared.caller_cpu.load(Ordering::SeqCst), index);
        while let Some(member) = shared.take(seen) {
            let job = *lock(&shared.job);
            if let Some(JobPtr(job)) = job {
                // SAFETY: this helper took a member of the current job, so
                // the caller keeps the job alive until that member is
                // counted done, which `run_member` does after the call.
                let f = unsafe { &*job };
                shared.run_member(f, member);
            } else {
                // Not reached (a member is taken only while its job is
                // set); counted so that the caller could not wait forever.
                shared.done.fetch_add(1, Ordering::Release);
            }
        }
    }
}

/// Waits until `ready()`: spins for [`SPIN_BEFORE_YIELD`], then yields
/// the CPU between checks. The spin covers the usual wait, a task ending
/// on another core within µs; the yield covers a thread the scheduler has
/// put on this one's CPU (after a wake-up, or on a busy machine), which
/// can only finish what is waited for when this thread steps aside. A
/// count of PAUSE instructions is no measure of time (a PAUSE costs from
/// 10 to 150 cycles across x86 cores), so the spin is timed.
pub(crate) fn wait_until(ready: impl Fn() -> bool) {
    if ready() {
        return;
    }
    let start = Instant::now();
    loop {
        for _ in 0..16 {
            if ready() {
                return;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= SPIN_BEFORE_YIELD {
            break;
        }
    }
    while !ready() {
        std::thread::yield_now();
    }
}

/// Where threads run (Linux; elsewhere the scheduler decides alone).
mod placement {
    /// The CPU this thread runs on, or −1 when unknown.
    pub(super) fn current_cpu() -> isize {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: sched_getcpu takes no arguments and only reads.
            unsafe { libc::sched_getcpu() as isize }
        }
        #[cfg(not(target_os = "linux"))]
        {
            -1
        }
    }

    /// Moves this helper (the `index`-th) off `caller_cpu` when it runs
    /// there: to the `index`-th CPU after the caller's among those this
    /// thread may use, by narrowing its affinity to that CPU (the kernel
    /// migrates a thread at once when its CPU leaves the mask) and then
    /// restoring the mask, so the scheduler stays free afterwards. A
    /// failed call changes nothing but the speed.
    pub(super) fn step_aside(caller_cpu: isize, index: usize) {
        #[cfg(target_os = "linux")]
        {
            if caller_cpu < 0 || current_cpu() != caller_cpu {
                return;
            }
            // SAFETY: a zeroed cpu_set_t is a valid empty set; the calls
            // get and set this thread's (pid 0) mask with its true size.
            unsafe {
                let size = std::mem::size_of::<libc::cpu_set_t>();
                let mut allowed: libc::cpu_set_t = std::mem::zeroed();
                if libc::sched_getaffinity(0, size, &mut allowed) != 0 {
                    return;
                }
                let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                    .filter(|&c| libc::CPU_ISSET(c, &allowed))
                    .collect();
                let Some(at) = cpus.iter().position(|&c| c as isize == caller_cpu) else {
                    return;
                };
                if cpus.len() < 2 {
                    return;
                }
                let target = cpus[(at + 1 + index % (cpus.len() - 1)) % cpus.len()];
                let mut only: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(target, &mut only);
                if libc::sched_setaffinity(0, size, &only) == 0 {
                    libc::sched_setaffinity(0, size, &allowed);
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (caller_cpu, index);
        }
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The values behind these locks are plain data, consistent after a
    // panic elsewhere.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_bands_cover_the_items_once_in_order() {
        for (total, members) in [(0, 3), (1, 2), (7, 2), (96, 2), (130, 4), (5, 8), (64, 1)] {
            let bands: Vec<_> = even_bands(total, members).collect();
            assert_eq!(bands.len(), members);
            let mut next = 0;
            for &(start, len) in &bands {
                assert_eq!(start, next);
                assert!(len >= total / members && len <= total.div_ceil(members));
                next += len;
            }
            assert_eq!(next, total);
        }
    }

    #[test]
    fn every_member_runs_once_and_members_can_wait_for_each_other() {
        for members in [1, 2, 3, 5] {
            for _ in 0..50 {
                let ran: Vec<AtomicUsize> = (0..members).map(|_| AtomicUsize::new(0)).collect();
                let arrived = AtomicUsize::new(0);
                for_each_member(members, &|m| {
                    ran[m].fetch_add(1, Ordering::SeqCst);
                    // A barrier: only completes if all run concurrently.
                    arrived.fetch_add(1, Ordering::SeqCst);
                    while arrived.load(Ordering::SeqCst) < members {
                        std::hint::spin_loop();
                    }
                });
                assert!(ran.iter().all(|r| r.load(Ordering::SeqCst) == 1));
            }
        }
    }

    #[test]
    fn a_member_panic_reaches_the_caller_and_the_team_survives() {
        let caught = catch_unwind(|| {
            for_each_member(2, &|m| {
                if m == 1 {
                    panic!("member 1 fails");
                }
            })
        });
        assert!(caught.is_err());
        let count = AtomicUsize::new(0);
        for_each_member(2, &|_| {
            count.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }

    /// A helper that never runs (here: never started, as one whose CPU
    /// another process holds) must not hold the caller up: the caller
    /// takes its members. A team that waited for its helpers to start
    /// would wait here forever.
    #[test]
    fn members_no_helper_has_started_run_on_the_caller() {
        let team = Team {
            shared: Arc::new(Shared::new(4)),
            busy: Mutex::new(()),
        };
        let caller = std::thread::current().id();
        for _ in 0..3 {
            let ran: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
            let on_caller = AtomicUsize::new(0);
            let ran_job = team.try_run(&|m| {
                ran[m].fetch_add(1, Ordering::SeqCst);
                if std::thread::current().id() == caller {
                    on_caller.fetch_add(1, Ordering::SeqCst);
                }
            });
            assert!(matches!(ran_job, Some(Ok(()))));
            assert!(ran.iter().all(|r| r.load(Ordering::SeqCst) == 1));
            assert_eq!(on_caller.load(Ordering::SeqCst), 4);
        }
    }

    /// Members are taken once each, and only from their own job: a
    /// helper that looks for work of a finished generation finds none.
    #[test]
    fn members_are_taken_once_and_only_from_their_generation() {
        let shared = Shared::new(3);
        shared
            .claim
            .store(Shared::claim_word(7, 1), Ordering::SeqCst);
        assert_eq!(shared.take(7), Some(1));
        assert_eq!(shared.take(6), None);
        assert_eq!(shared.take(8), None);
        assert_eq!(shared.take(7), Some(2));
        assert_eq!(shared.take(7), None);
        // The generation's low 32 bits are what is compared.
        let wrapped = (1u64 << 32) + 5;
        shared
            .claim
            .store(Shared::claim_word(wrapped, 0), Ordering::SeqCst);
        assert_eq!(shared.take(wrapped), Some(0));
    }

    #[test]
    fn concurrent_callers_and_nested_calls_fall_back_to_rayon() {
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20 {
                        for_each_member(2, &|_| {
                            for_each_member(2, &|_| {
                                total.fetch_add(1, Ordering::SeqCst);
                            });
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::SeqCst), 4 * 20 * 4);
    }
}
