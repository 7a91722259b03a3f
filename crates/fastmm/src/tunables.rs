//! Every tunable constant of the CPU algorithms and of verification, in
//! one place (the GPU's are in `crate::cuda::tunables`). The bench tool
//! sweeps the ones exposed as options (`--tile`, `--threads`, `--blocks`).

/// Default edge of the square tiles of `tiled` and `parallel`, in elements.
/// 256 (the seed's choice) keeps a tile of B (256 KiB in f32) in L2 while the inner i-k-j loop
/// streams its rows.
pub const DEFAULT_TILE: usize = 256;

/// Products with m·n·k below this run `parallel` on the calling thread:
/// waking the pool costs more than the work (64³ ≈ 0.3 ms of scalar work).
pub const PARALLEL_MIN_MNK: u128 = 64 * 64 * 64;

/// Slabs of C rows per thread in `parallel`: more than one lets rayon even
/// out threads that run at different speeds.
pub const PARALLEL_SLABS_PER_THREAD: usize = 2;

/// `packed`'s KC makes the two micro-panels one kernel call reads (MR×KC of
/// Ã, KC×NR of B̃) fill this fraction of L1, up to [`MAX_KC`] (see
/// `packed::blocking`): all of it, so 192 for the AVX-512 f64 8×24 kernel
/// on a 48 KiB L1, which measured 10–15% faster than 512 on the Ice Lake
/// machine.
pub const KC_L1_FRACTION: (usize, usize) = (1, 1);

/// A kernel whose two operands, streamed from L2, would need at most this
/// many bytes per cycle at the core's FMA rate (see
/// `packed::blocking::l2_bytes_per_cycle`) does not need B̃'s micro-panel
/// in L1, and takes the deeper KC of [`KC_STREAMING_L1_FRACTION`]. The
/// AVX-512 kernels on Zen 4, which runs one 512-bit FMA per cycle, need
/// 9.3 (f32 8×48) and 10.7 (f64 8×24) bytes per cycle and ran 4–12%
/// faster at KC = 512 and 256 than at the L1 rule's 144 and 128 (two
/// threads, Zen 4); on Ice Lake (two 512-bit FMAs per
/// cycle, 18.7 and 21.3) the L1 rule measured 10–15% faster than KC = 512,
/// and Zen 3's AVX2 kernels (14.7 and 18.7) stay with it too.
pub const L2_STREAM_MAX_BYTES_PER_CYCLE: usize = 12;

/// The same budget on a core whose L2 fills L1 at 64 bytes per cycle, twice
/// Zen 4's: Zen 5 (AMD family 1Ah). Its AVX-512 kernels (two 512-bit FMAs
/// per cycle) need 18.7 (f32 8×48) and 21.3 (f64 8×24) bytes per cycle
/// and ran faster with the streaming blocks than with the L1 rule's KC
/// of 216 and 192 on a 48 KiB L1 (Zen 5). Emerald Rapids (a 2-vCPU guest,
/// 48 KiB L1, 2 MiB L2) takes it where C is larger than L2 only: there
/// the deep blocks (f64 256/512, f32 512/512) against the L1 rule's
/// (680/192, 1208/216), `fastmm run` alternating, 3–5 runs: one thread
/// f64 1.04–1.12× at 1024³–4096³, f32 1.02–1.17×; two threads 4096³
/// 1.02–1.05× (f64) and 1.02–1.04× (f32), 8192³ f64 1.09× (3 of 3, with
/// the L3 share of `L3_PER_CPU_MAX`), 768³–2048³ 0.95–1.08×. Where C fits
/// in L2 they lost: 512³ f32 0.79× on two threads (0 of 5).
pub const L2_STREAM_MAX_BYTES_PER_CYCLE_WIDE_L2: usize = 24;

/// For kernels that stream both operands from L2, KC makes one call's
/// micro-panel of Ã (MR×KC) fill this fraction of L1, up to [`MAX_KC`]:
/// deep steps pass over C fewer times, and half of L1 leaves room for the
/// lines of B̃ and C passing through. 512 for f32 8×48 and 256 for f64 8×24
/// on a 32 KiB L1; f64 at 512 measured level with 256.
pub const KC_STREAMING_L1_FRACTION: (usize, usize) = (1, 2);

/// ...and a product whose C is larger than L2, so that every KC step passes
/// over C in memory, takes deeper blocks in that regime: Ã's micro-panel
/// fills this fraction of L1 (KC) and its block this fraction of L2 (MC),
/// with NC kept from the shallower KC. f64 8×24 on Zen 4 (32 KiB L1,
/// 1 MiB L2): KC 384 and MC 256 against 256 and 256 ran 4096³ 1.02–1.03×
/// in three runs (5 of 5, 6 of 7, 5 of 5 rounds), 2048³ 1.01× (6 of 7),
/// 1024³ 1.01× (7 of 7); KC 384 with MC 168 (half of L2) lost 1%, and NC
/// from the deeper KC (2712, two blocks at 4096) gave back half the gain.
/// Where C fits in L2 the deeper blocks crowd it out: 256×4096×256 f64
/// ran 0.89×. f32 stays at [`MAX_KC`]; its MC of 384 measured level
/// (1.00–1.01×) with 256. Both fractions then went to all of the cache:
/// f64 KC 512 with MC 256 against 384 and 256, in one process (7 rounds each): 1024³ 1.05× and 1.04×, 2048³ 1.02× (7 of 7)
/// and 1.02×, 4096³ 1.02× (7 of 7) and 1.00×, and two-level Winograd at
/// 4096³ (1024³ base products) 1.03× (6 of 7); MC 192 (3/4 of L2 at KC
/// 512) was 1% behind at 4096³. f32 MC 512 level with 384 (1.00–1.01×),
/// i64 KC 336 level with 256, i32 MC 504 level with 384 (`fastmm run
/// --size 2048`, three alternations each).
pub const KC_STREAMING_LARGE_C_L1_FRACTION: (usize, usize) = (1, 1);

/// See [`KC_STREAMING_LARGE_C_L1_FRACTION`].
pub const MC_LARGE_C_L2_FRACTION: (usize, usize) = (1, 1);

/// ...but on a core with the wide L2 ([`L2_STREAM_MAX_BYTES_PER_CYCLE_WIDE_L2`],
/// Zen 5), whose kernel reads each B̃ micro-panel twice as fast, the Ã
/// block takes half of L2. Zen 5, one process, 7–9 rounds: f64 MC 128
/// against 256 at KC 512, 2048³ 1.03× on one thread
/// (9 of 9), 1.02× (7 of 7) at 2048³ and 4096³ and 1.01× at 1024³ on two;
/// f32 MC 256 against 512 1.00–1.02× (1.01× on one thread, 7 of 7).
pub const MC_LARGE_C_L2_FRACTION_WIDE_L2: (usize, usize) = (1, 2);

/// Largest KC the analytical rule picks. 512 measured 4% faster than 256
/// for f64 and 1–2% for f32 on one thread at n = 2048; 768 and 1024 no
/// faster than 512.
pub const MAX_KC: usize = 512;

/// `packed`'s MC makes one thread's block of Ã (MC×KC) fill this fraction
/// of L2; the rest holds the B̃ micro-panels passing through to L1 and the
/// lines of C.
pub const MC_L2_FRACTION: (usize, usize) = (1, 2);

/// `packed`'s NC makes the shared block of B̃ (KC×NC) fill this fraction of
/// L3 (the share of it in [`L3_PER_CPU_MAX`]).
pub const NC_L3_FRACTION: (usize, usize) = (1, 4);

/// The blocks count at most this much last-level cache per CPU that
/// shares it. A guest of a few vCPUs is shown its host's whole L3 (300 MiB
/// on a 2-vCPU Xeon guest, family 6 model 207), which other guests use
/// too. There, at 8192³ f64 on two threads, NC = 4096 (a B̃ of 6.3 MB)
/// took 0.84× the time of NC from a quarter of the whole L3 (one block,
/// 12.6 MB), which ran at 0.83× OpenBLAS's speed (medians of three
/// rounds); with the deep blocks of a large C (KC 512), NC 2720 took
/// 0.95× the time of 5448 at 8192³ and 0.93× at 4096³. 8 MiB per CPU (16
/// MiB there) gives both. No real chip has this much per logical CPU (a
/// Ryzen 9800X3D has 6 MiB, Emerald Rapids 2.5), so hosts are unaffected.
pub const L3_PER_CPU_MAX: usize = 8 << 20;

/// NC may grow by this fraction (numerator, denominator) when that keeps all
/// columns of B in one block: a second block re-packs all of A, which at
/// n = 8192 and NC = 8184 would buy 8 columns.
pub const NC_SLACK: (usize, usize) = (1, 4);

/// Products with m·n·k below this skip packing: `packed` runs its direct
/// path where it can (see [`PACKED_DIRECT_MAX_MNK`]), else the unpacked
/// `tiled` loops, which measured faster than packing up to about 16³.
pub const PACKED_MIN_MNK: u128 = 20 * 20 * 20;

/// How long a team's helper thread spins for the next job before it
/// parks (see `threads`): long enough to cover the gap between products
/// in a loop, so that a run of small products never waits for a thread
/// to wake; short enough that an idle program stops burning a core
/// almost at once.
pub const TEAM_SPIN: std::time::Duration = std::time::Duration::from_micros(200);

/// How long a thread waiting for another thread's task spins before it
/// yields the CPU between checks (`threads::wait_until`): a few µs, the
/// usual wait for a task ending on another core. A thread waited for on
/// the same CPU (as the scheduler places one after a wake-up) gets to run
/// at the first yield: spinning 2^12 PAUSEs first had cost 0.4 ms per
/// 64³ product on two co-located threads.
pub const SPIN_BEFORE_YIELD: std::time::Duration = std::time::Duration::from_micros(4);

/// Products with m·n·k up to this run `packed`'s direct path (no packing;
/// see `cpu::packed::direct`) when they run on one thread and B's rows
/// are contiguous.
pub const PACKED_DIRECT_MAX_MNK: u128 = 384 * 384 * 384;

/// An interruptible `packed` product above this m·k·n (a few hundred
/// milliseconds on a desktop) runs as a sum over panels of k, checking its
/// [`crate::Interrupt`] between them; smaller ones end soon enough.
pub const INTERRUPTIBLE_MNK: u128 = 4096 * 4096 * 4096;

/// Depth of those panels of k (rounded up to whole KC blocks): long enough
/// that re-packing A's columns costs nothing, short enough to stop within
/// a second.
pub const INTERRUPT_K_PANEL: usize = 2048;

/// Untuned, `packed` runs products of at least this edge cubed on several
/// threads, by element size (4-byte, 8-byte types), and smaller ones on
/// the calling thread: where a second thread's share outweighs waking it
/// and waiting for it. Measured one thread against two on a 2-vCPU Xeon
/// guest (f32: 0.84× at 160³, 1.13× at 192³; f64: 0.88× at 112³, 1.06×
/// at 128³); a Zen 4 machine crossed over near 80³, and `fastmm tune`
/// records each machine's own crossover. A small product on one thread
/// also never waits for a thread that a neighbour keeps off its CPU.
pub const PACKED_PARALLEL_FROM: (usize, usize) = (160, 128);

/// `packed` runs products of at least this edge cubed (by element size:
/// 4-byte, 8-byte; the options' parallel edge where they name one) as
/// bands of C's columns on the threads, each band on the direct path,
/// where every band fits that path: far below `PACKED_PARALLEL_FROM`,
/// since nothing is packed or shared. On the 2-vCPU Zen 5 guest, dgemm_
/// and sgemm_ in a C loop (`scripts/blas_small.sh`), the path before
/// against the bands, two runs, µs: d48 1.84–1.86 / 1.48–1.75, d64
/// 4.20–4.25 / 2.72–2.97, d80 8.0–8.7 / 4.6–4.8, d96 13.7–14.5 / 7.5–7.9,
/// d128 21.8–22.2 / 17.1–17.2, d256 145–146 / 136; s48 0.90 / 1.20–1.23,
/// s64 2.04–2.07 / 1.63–1.74, s80 3.93–3.95 / 2.93–3.07, s96 6.66–6.71 /
/// 3.97–3.98, s128 16.1–16.2 / 9.1–11.0, s256 74.8–74.9 / 67.3–67.7.
/// The edges are past the fast state's crossovers (about 48 and 56),
/// since the hand-off between the two vCPUs costs 1–3 µs more in the
/// host's slow state (see `COMPLEX_STACKED_PARALLEL_FROM`).
pub const PACKED_BANDS_FROM: (usize, usize) = (80, 72);

/// Each band of that path holds at least this many of C's columns: more
/// than one of the AVX-512 kernels' column panels (24 for f64, 48 for
/// f32 are a panel's columns, and a narrower band runs a partial one), so
/// that a machine with many threads does not cut a small product into
/// bands that mostly run partial panels (a guard: no machine with more
/// than two CPUs was at hand to measure it on).
pub const PACKED_BAND_MIN_COLS: usize = 32;

/// `packed` on several threads cuts each block of C it splits by rows into
/// about this many row tasks per thread (each at least 32 micro-panels of Ã
/// and at most MC rows, a multiple of the threads in all, of equal panel
/// counts), which whichever thread is free takes next: a
/// thread the host pauses (steal time on a shared virtual machine) then
/// holds up only its current task, not a share fixed in advance. Against
/// one share per thread on Ice Lake, two threads, interleaved pairs:
/// f64 2048³ 2–3% faster (100 pairs), 4096³ 3% (20), 1024³
/// 1% (60); f32 2048³, 4096×256×4096 and 256×4096×256 level.
/// Cutting B̃'s packing the same way measured level
/// at 2048³ and 5–11% slower at 1024³, so that stays one share per thread.
pub const TASKS_PER_THREAD: usize = 4;

/// `packed` cuts k into slices instead of splitting C when C takes at
/// most this many bytes (one private copy per slice but the first, added
/// up in slice order at the end)...
pub const SPLIT_K_MAX_C_BYTES: usize = 1 << 20;

/// ...and C has at most this many elements: with larger C the row
/// pipeline's tasks are long enough that taking them in order costs less
/// than the private copies. Two machines disagree on where that happens
/// (measured when the slices were one per thread, two threads, so a C of
/// 256×256 meant half of it per thread). Two threads on Zen 3 (KC from
/// L1), pipeline against split-k, interleaved pairs: f32 256×4096×256
/// 1.06× and 1.08× (6 of 10, 14 of 16 pairs), f64 1.05× and 1.05×, f32
/// 192×4096×192 1.05× (6 of 12); f32 128×8192×128 0.87×. On Zen 4 (the
/// deep KC of the streaming rule) split-k against the pipeline: f32
/// 256×4096×256 1.11× and 1.12× (12 of 16, 6 of 10), f64 1.04× (9 of
/// 10), f32 192×4096×192 1.02× and 320×4096×320 1.04× (5 of 8 each),
/// 256×8192×256 level. The limit follows Zen 4 (and Zen 5, which streams
/// like it); `fastmm tune` does not search it yet. It does not depend on
/// the thread count, so that whether k is sliced (and so each element's
/// order of summation) is the same on any team.
pub const SPLIT_K_MAX_C_ELEMENTS: usize = 256 * 256;

/// ...and k holds at least this many KC steps per slice: fewer, and the
/// copies of C cost more than the per-step synchronisation they save.
pub const SPLIT_K_MIN_STEPS_PER_SLICE: usize = 4;

/// At most this many slices of k (a power of two, so that teams of 2, 4,
/// 8 and 16 threads share them evenly). The slices are cut by the shape
/// alone, never by the thread count: one thread computes them one after
/// another exactly as a team does side by side, so results are the same
/// bits on any team.
pub const SPLIT_K_MAX_SLICES: usize = 16;

/// `auto` asks whether Winograd's plan applies a level only when m, k and
/// n are all at least this: below it no measured crossover (built in or
/// tuned) recurses, and small products skip the question's dry run.
pub const AUTO_FAST_MIN_DIM: usize = 256;

/// `strassen`/`winograd` on the CPU recurse while m, k and n are all at
/// least this (`--threshold auto`), so base products stay ≥ 1024: on
/// Zen 4 (two threads, f64) three levels at 8192 (base 1024) ran 1.20–
/// 1.23× `packed` and 1.17–1.20× OpenBLAS, two at 6144 (base 1536) 1.18×
/// and 1.12×, where n₀ = 4096 gave 1.16× and 1.08× `packed`.
pub const STRASSEN_AUTO_THRESHOLD: usize = 2048;

/// ...but `auto` applies a first level only from this size (f64, i64). On
/// Zen 4 one level on 2048–3001 measured 0.92–1.04× `packed` and at 3500
/// 1.04–1.11×; on Ice Lake, whose faster kernels (8×24) move the
/// crossover up, Winograd at 3072 ran 0.96× `packed` and at 4096 1.08×.
pub const STRASSEN_AUTO_START_8_BYTE: usize = 4096;

/// ...and from this size for f32 and i32, whose kernel does twice the
/// flops per byte the additions move. Zen 4: one level on 2048–3500
/// 0.90–1.09× `packed`, at 4096 1.05–1.13×; Ice Lake: Winograd at 4096
/// 0.93×, at 5120 0.95×, at 6144 1.09×, at 8192 1.35×.
pub const STRASSEN_AUTO_START_4_BYTE: usize = 6144;

/// ...or from this size on a core that retires at most
/// [`STRASSEN_SLOW_FMA_BITS_PER_CYCLE`] bits of FMA results per cycle
/// (Zen 3, Zen 4: half of Ice Lake's 1024), where the additions cost half
/// as many kernel cycles per byte. Zen 4 (`fastmm-peers
/// --shapes 4096 --dtype f32`, 5 rounds, two runs): Winograd at 4096 (two
/// levels, base 1024) 1.12× and 1.07× `packed`, 1.20× and 1.16× OpenBLAS.
/// Measured on Zen 4 only; other such cores (Zen 3, AVX2-only Intel
/// cores) take it by the same reasoning, unmeasured, and `fastmm tune`
/// measures the crossover on the machine at hand. Zen 5 (two 512-bit FMAs
/// per cycle, but an L2 that streams twice as wide,
/// [`L2_STREAM_MAX_BYTES_PER_CYCLE_WIDE_L2`], and 64 GB/s from memory on
/// a two-vCPU guest) takes it too: Winograd `batched` at 4096 f32,
/// two levels, 1.15× `packed` and 1.16× OpenBLAS.
pub const STRASSEN_AUTO_START_4_BYTE_SLOW_FMA: usize = 4096;

/// See [`STRASSEN_AUTO_START_4_BYTE_SLOW_FMA`].
pub const STRASSEN_SLOW_FMA_BITS_PER_CYCLE: usize = 512;

/// Most levels `auto` applies to f32: the measured relative error at
/// n = 2048 on uniform [-1, 1] inputs is 1.2e-6 (Strassen) and 2.1e-6
/// (Winograd) at two levels and reaches 1.2e-5 (Winograd) at four, so two
/// keeps it within 1e-5 with room for larger n.
pub const STRASSEN_AUTO_MAX_LEVELS_F32: usize = 2;

/// Most levels `auto` applies to f64: at four levels the measured error is
/// at most 2.2e-14, within 1e-13.
pub const STRASSEN_AUTO_MAX_LEVELS_F64: usize = 4;

/// Most levels for the exact integer types (and any explicit `--depth`
/// beyond it is honoured).
pub const STRASSEN_MAX_LEVELS: usize = 32;

/// In the stored (`frugal`, `temporaries`) schedules on the CPU, a sum of
/// at most this many blocks of A or of B read by a leaf product may be
/// left unstored and formed by that product while `packed` packs its
/// panels (`--lazy-sums`). Off by default: on Zen 4 it cut the additions
/// from 10% to 6% of a two-level 4096³ f64 Winograd product but raised
/// packing from 5% to 13% (the packing of a sum waits on strided loads of
/// every term, where a stored sum streams).
pub const STRASSEN_LAZY_SUM_TERMS: usize = 0;

/// Linear combinations of at least this many elements run on all threads.
pub const STRASSEN_PARALLEL_MIN_ELEMENTS: usize = 1 << 16;

/// `strassen`/`winograd` on the CPU run `batched` by default when its
/// temporaries (15 quarter-size blocks per level: 3.75 times C at the top
/// level, 600 MiB for 4096³ f64 at two levels) take at most this fraction
/// of the memory the OS reports available, else `frugal` (see
/// `strassen::cpu_default_variant`).
pub const STRASSEN_BATCHED_MAX_MEMORY_FRACTION: (usize, usize) = (1, 2);

/// Sums over contiguous rows are formed a cache line at a time, every
/// source advancing together; each source's line this many lines ahead is
/// prefetched, so more lines are in flight than the out-of-order window
/// alone reaches. The level-1 A group of 4096² f64 on two threads
/// (Zen 5): 5.8 ms with none, 5.0 at 4, 4.6–5.0 at 8–32 lines.
pub const STRASSEN_SUM_PREFETCH_LINES: usize = 16;

/// On the CPU, a pass of Strassen/Winograd sums whose fresh destinations
/// total at least this fraction (numerator, denominator) of the last-level
/// cache writes them with non-temporal stores (`strassen::SumStores`):
/// they would be evicted before the products read them, so the read for
/// ownership of ordinary stores is wasted. On Zen 4 (L3 32 MiB) the
/// additions of a two-level 4096³ f64 `batched` Winograd product fell
/// from 12.4% to 10.4% of the kernel's time; streaming every pass or only
/// those of at least 20 MB measured the same.
pub const STRASSEN_STREAM_MIN_L3_FRACTION: (usize, usize) = (1, 2);

/// Largest m·n·k for which `verify` computes a full f64 reference product.
/// Above it the O(n²) randomized check is used.
pub const FULL_CHECK_MAX_MNK: u128 = 1 << 28;

/// Most elements of C whose reference a `verify::Reference` keeps (16
/// bytes each for floats: 64 MiB); a larger C is checked as `verify`
/// checks it, each time.
pub const REFERENCE_MAX_ELEMENTS: usize = 1 << 22;

/// Random vectors per randomized (Freivalds) check of a float product.
pub const FREIVALDS_FLOAT_VECTORS: usize = 3;

/// Rows and columns of C compared element by element in a randomized float
/// check (the first and last of each always among them, where edge tiles live).
pub const VERIFY_SAMPLED_LINES: usize = 8;

/// `verify` multiplies a matrix by a vector on all threads (in blocks of
/// [`VERIFY_ROWS_PER_TASK`] rows) from this many elements on; below it
/// the calling thread does it alone.
pub const VERIFY_PARALLEL_MIN_ELEMENTS: usize = 1 << 20;

/// Rows of the matrix per parallel task of `verify`'s matrix-vector
/// products: a few hundred keep the slice of y a task updates in L1.
pub const VERIFY_ROWS_PER_TASK: usize = 256;

/// Random vectors per randomized check of an integer product. A wrong
/// product survives one vector with probability at most 1/2 in Z/2^w.
pub const FREIVALDS_INT_VECTORS: usize = 20;

/// Safety factor on the first-order rounding bound γ_k ≈ k·u used to accept
/// a float result (see `verify`).
pub const FLOAT_TOLERANCE_FACTOR: f64 = 2.0;

/// Emulated products: the most elements of C, as a fraction m·n/this,
/// whose accuracy the chosen bits cannot certify and that are recomputed
/// by the native product one by one; past it the whole product runs
/// natively. Each such element costs k native multiply-adds, so 1/256 of
/// C costs at most 1/256 of the native product.
pub const EMULATION_FIXUP_FRACTION: usize = 256;

/// Emulated products: the depth of one INT8 product. Each of its INT32
/// sums adds at most this many products of symmetric residues (|r| ≤ 128),
/// so |sum| ≤ 2¹⁶·2¹⁴ = 2³⁰ < 2³¹; deeper products are split along k and
/// their sums added modulo each modulus.
pub const EMULATION_K_CHUNK: usize = 1 << 16;

/// The certificate's magnitude product first runs over the first q parts
/// of `EMULATION_CERTIFICATE_SAMPLE` of the depth (rounded up to 32), the
/// smallest share whose bits cannot typically cost a modulus
/// ([`crate::emulation::certify::certificate_share`]): its partial sums
/// of nonnegative terms are still lower bounds of |A||B|, log₂ s/q bits
/// lower for evenly spread magnitudes. The rest of the depth runs only
/// where those bits could save a modulus or the route went native
/// ([`crate::emulation::certify::wants_full_depth`]). At n = 16384 on
/// uniform data, f64 at the native level (47.5 bits of the 48 that 14
/// moduli hold) saves a quarter of one INT8 product; f32 (19 bits of
/// the 20 that 7 moduli hold) half of one.
pub const EMULATION_CERTIFICATE_SAMPLE: usize = 4;

/// The depth from which an emulated product's moduli come from the
/// largest norms of its rows and columns
/// ([`crate::emulation::certify::Sums`]), a bit below the depth's bound
/// on evenly spread data. Shallower products keep the depth's bound and
/// its spare bits: a native product of a few terms is nearly
/// exact-rounded, and the `native` level's audit compares with it (f32
/// at 1×2×1 on scaled rows: 23 bits gave 46× its error where 27 had met
/// it). 256 is where the native errors were measured from
/// (`NATIVE_ERROR_*`).
pub const EMULATION_NORMS_MIN_DEPTH: usize = 256;

/// The `native` accuracy level's certificate: every element of an
/// emulated product within c·λ(k)·u·(|A||B|)_ij, c this constant and λ
/// the native product's error ([`crate::emulation::certify::Target::of`]).
/// The certificate bounds the worst case; the error met on uniform data
/// was 0.1–0.35 of the certified τ (the widest bits the moduli hold
/// decide where in that range). Measured with the twin against `packed`
/// (k = 256 to 16384, every input class): at c = 3 the largest ratio to
/// `packed`'s errors was 0.94; at c = 8 f32 at k = 16384 reached 2.46.
pub const EMULATION_NATIVE_TAU: f64 = 3.0;

/// λ of the CPU's `packed` (f32 and f64): its relative Frobenius error on
/// uniform data, in units of u, was 4.4–4.8 from k = 256 to 16384 (the
/// 2-core Xeon guest, AVX-512 kernels; `fastmm accuracy`).
pub const NATIVE_ERROR_PACKED: f64 = 4.5;

/// λ(k) = max(flat, per_root_k·√k) of cuBLAS sgemm, in units of u: on
/// the lent H200 (cuBLAS of CUDA 13.0) its error on uniform data grew as
/// 0.30·√k (k = 4096: 19u, k = 16384: 38u; `scripts/accuracy-gpu.sh
/// calibrate`); below a few hundred, and on small outputs, taken as
/// `packed`'s flat 4.5.
#[cfg(any(feature = "cuda", test))]
pub const NATIVE_ERROR_SGEMM: (f64, f64) = (4.5, 0.3);

/// Outputs (m·n) below which cuBLAS's native error is taken as the flat
/// λ of `packed` (4.5u) rather than 0.3·√k·u: where its tiles of C cannot
/// fill the GPU, cuBLAS splits k, and shorter sums err less. On the H200
/// the emulated product certified for 0.3·√k·u had 2.41× sgemm's errors
/// at 64×4096×48 (cancellation, the GPU self-test), within 0.6× at
/// 4096² and above; 2²¹ outputs are 128 tiles of 128×128, about one per
/// SM.
#[cfg(any(feature = "cuda", test))]
pub const NATIVE_ERROR_CUBLAS_SMALL_OUTPUTS: usize = 1 << 21;

/// λ(k) of cuBLAS dgemm, in units of u: 0.30·√k on the same H200
/// (k = 1024: 9.7u, 4096: 19u, 16384: 38.6u).
#[cfg(any(feature = "cuda", test))]
pub const NATIVE_ERROR_DGEMM: (f64, f64) = (4.5, 0.3);

/// `auto` at the `native` level on a GPU picks `emulated` for f32 where
/// m, k and n are all at least this: on the lent H200 (7 moduli) it ran
/// 0.53× cuBLAS sgemm at 2048³, 1.38× at 4096³ and 2.58× at 16384³
/// (median of 7; `scripts/accuracy-gpu.sh targets`).
pub const EMULATION_NATIVE_AUTO_MIN_DIM_F32: usize = 4096;

/// `auto` at the `native` level on a GPU picks `emulated` for a strided
/// batch of at least two f32 products (one launch per step over the
/// batch) whose m, k and n are all at least this: on the lent H200 it ran
/// 1.33× `torch.bmm` at 2 × 3072³, 1.34× at 8 × 3072³ and 1.55–1.59× at
/// 2, 4 and 8 × 4096³, but 0.82–0.93× at 1536³ (8 to 64 products;
/// median of 5 interleaved rounds, `torch.bmm` in the same process).
pub const EMULATION_NATIVE_AUTO_BATCH_MIN_DIM_F32: usize = 3072;

/// Below [`EMULATION_NATIVE_AUTO_BATCH_MIN_DIM_F32`], `auto` at `native`
/// takes `emulated` for a strided batch of f32 products whose sides are
/// all at least [`EMULATION_NATIVE_AUTO_BATCH_SMALL_DIM_F32`] when there
/// are at least this many: at 2048³ it ran 0.74× `torch.bmm` for 2
/// products, 0.90× for 4, 1.00× for 8, 1.06× for 16, 1.14× for 32 and
/// 1.07× for 64 (H200, as above).
pub const EMULATION_NATIVE_AUTO_BATCH_MIN_COUNT_F32: usize = 16;

/// The sides of [`EMULATION_NATIVE_AUTO_BATCH_MIN_COUNT_F32`]'s rule.
/// f64 has no batch rule: its 15 moduli ran 0.31× `torch.bmm` at
/// 64 × 2048³, 0.53× at 16 × 4096³ and 0.82× at 4 × 8192³.
pub const EMULATION_NATIVE_AUTO_BATCH_SMALL_DIM_F32: usize = 2048;

/// As [`EMULATION_NATIVE_AUTO_MIN_DIM_F32`] for f64 (15 moduli): 1.00×
/// cuBLAS dgemm at 8192³, 1.13× at 12288³, 1.27× at 16384³.
pub const EMULATION_NATIVE_AUTO_MIN_DIM_F64: usize = 12288;

/// `auto` on a GPU picks `emulated` for f32 where m, k and n are all at
/// least this: on the lent H100 it ran 2.40× cuBLAS sgemm at 8192³ and
/// 3.23× at 16384³, but 0.91× at 8192×1024×8192, where its fixed costs
/// (statistics, certificate, the INT32 planes read back) dominate.
pub const EMULATION_AUTO_MIN_DIM_F32: usize = 8192;

/// As [`EMULATION_AUTO_MIN_DIM_F32`] for f64: 1.44× cuBLAS dgemm at 16384³,
/// but only 1.09× at 8192³ (within the noise of a shared machine).
pub const EMULATION_AUTO_MIN_DIM_F64: usize = 16384;

/// `auto` on a GPU picks `emulated` (INT8 products of byte planes) for
/// i32 where m and n are at least this (and k at least
/// [`EMULATION_AUTO_MIN_K_INT`]): on the lent H200 it ran 1.35×
/// `cuda-fast` at 1024³, 1.79× at 2048³, 2.04× at 8192×1024×8192 and
/// 5.21× at 16384³.
pub const EMULATION_AUTO_MIN_DIM_I32: usize = 1024;

/// As [`EMULATION_AUTO_MIN_DIM_I32`] for i64: 0.99× `cuda-fast` at 1024³
/// (36 INT8 products against its 64-bit multiply-adds), 2.40× at 2048³,
/// 2.38× at 8192×1024×8192 and 5.65× at 16384³.
pub const EMULATION_AUTO_MIN_DIM_I64: usize = 2048;

/// The least k at which `auto` gives integers to `emulated`: the
/// shallowest measured depth at which it won (1024).
pub const EMULATION_AUTO_MIN_K_INT: usize = 1024;

/// The share (numerator, denominator) of a node's available memory that
/// its MPI ranks plan to use for their pieces and buffers, leaving the
/// rest to the OS and to other allocations made while the product runs.
#[cfg(feature = "mpi")]
pub const CLUSTER_MEMORY_FRACTION: (u64, u64) = (9, 10);

/// While a rank multiplies one step's blocks, its main thread tests the
/// next step's non-blocking broadcasts this often (Open MPI moves a large
/// message only while its ranks call into it).
#[cfg(feature = "mpi")]
pub const CLUSTER_PROGRESS_POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// The share (numerator, denominator) of a GPU's free memory that an MPI
/// rank plans to keep its pieces and buffers in, when its products run on
/// that GPU: the rest is room for the local products' workspaces and a
/// fast algorithm's temporaries. Pieces that do not fit stay in host
/// memory.
#[cfg(feature = "mpi")]
pub const CLUSTER_GPU_MEMORY_FRACTION: (u64, u64) = (8, 10);

/// How long a rank waits for the other members of a group of GPUs to join
/// its NCCL communicator (each joins after its own earlier groups; a
/// member that never comes has failed).
#[cfg(feature = "mpi")]
pub const CLUSTER_GPU_JOIN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);

/// How long a rank waits, when it lets go of its GPU's NCCL
/// communicators, for the other members of each group to let go too
/// (NCCL's release waits for them): past it the release is left to the
/// process's end, so that a member that died cannot hold this one.
#[cfg(feature = "mpi")]
pub const CLUSTER_GPU_RELEASE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// The most bytes one MPI message carries (a message's count is a C
/// `int`): larger buffers go as consecutive messages of this size. 1 GiB:
/// large enough that the cut costs nothing, a power of two so that it
/// never splits an element.
#[cfg(feature = "mpi")]
pub const CLUSTER_MESSAGE_BYTES: usize = 1 << 30;

/// The sizes, in bytes, of the real parts of the complex types whose
/// strided output (numpy's interleaved storage) a 3M complex product
/// computes in contiguous pooled planes and stores once at the end,
/// rather than having its real products write the strided parts in
/// place. Measured on the 2-core Zen 4 guest at 4096², interleaved with
/// numpy (`python/benchmarks/complex_cpu.py`): through planes, complex64's
/// 3M product took 1.64 s instead of 1.82 s, while complex128's took 3.78
/// s instead of 3.50 s, so only 4-byte parts go through planes (on the
/// Zen 5 guest through the BLAS, 4096² c128: 2.24–2.28 s against
/// 2.14–2.26). The classical form, whose four products write each part
/// of C twice, always goes through planes: 4096² c128 through the BLAS
/// on the Zen 5 guest took 2.87–2.90 s so against 3.56–3.65 s in place.
pub const COMPLEX_PLANAR_OUTPUT_PART_BYTES: &[usize] = &[4];

/// Complex products: the element passes around the real products
/// (splitting interleaved parts, storing, 3M's combination) run on the
/// thread pool from this many elements of the operand or output; below
/// it on the caller's thread. Waking the pool costs tens of
/// microseconds on a VM (a 2³ zgemm through libfastmm_blas took 37 µs,
/// OpenBLAS's 67 ns), while a pass over 64 K elements takes about as
/// long on one core.
pub const COMPLEX_PARALLEL_MIN_ELEMENTS: usize = 1 << 16;

/// Complex products on the CPU at the classical form whose A is not
/// interleaved (or too large for `packed`'s direct path) run in one loop
/// ([`crate::cpu::complex_direct`]) up to this many multiply-adds (m·k·n),
/// instead of as four planned real products: below it the plans, planes
/// and reports cost more than the loop.
pub const COMPLEX_DIRECT_LOOP_MAX_VOLUME: usize = 8 * 8 * 8;

/// Complex products of at most this many multiply-adds whose B has
/// interleaved rows (numpy's row-major arrays), or whose A has
/// interleaved columns (the BLAS's column-major storage, as Cᵀ = Bᵀ·Aᵀ),
/// run in AVX-512 registers row by row of C where the CPU has them
/// ([`crate::cpu::complex_direct`]): no copy, no second product, no
/// combining pass over a buffer. zgemm_ in a C loop on the Zen 5 guest
/// (OpenBLAS, one thread, beside it): 4³ 80 ns this way against 101
/// through the loop (59), 8³ 135–152 against 166–170 through the one
/// real product (140), 16³ 482–493 against 486–504 (724); past 16³ the
/// real product's packed kernel wins.
pub const COMPLEX_ROWS_MAX_VOLUME: usize = 16 * 16 * 16;

/// Smaller complex products take the loop even where the registers'
/// path could run: a 2³ zgemm_ took 52 ns through the loop and 70 this
/// way.
pub const COMPLEX_ROWS_MIN_VOLUME: usize = 3 * 3 * 3;

/// Complex products of at most this many multiply-adds take that loop
/// even where A is interleaved: a 2³ zgemm took 48 ns through it and 119
/// through the two real products on the direct path (OpenBLAS 39).
pub const COMPLEX_DIRECT_TINY_VOLUME: usize = 4 * 4 * 4;

/// Complex products on the CPU that run as stacked real products on
/// `packed`'s direct path share their columns of C among threads from
/// this edge cubed (m·k·n), by element size (4-byte, 8-byte parts), each
/// thread its band whole (its columns of both real products and of the
/// combining pass, nothing to wait for), and each share may then be past
/// `packed`'s own parallel edge: far below that edge, since nothing is
/// packed or shared. On the 2-vCPU Zen 5 guest a second thread costs
/// 0.4 µs a call when the two vCPUs exchange a cache line in ~90 ns, and
/// 1–3 µs when the host makes that 350–440 ns (both states came and went
/// within minutes). zgemm_ in a C loop, one thread against two in the
/// first state: 24³ 1.34 against 1.44 µs, 28³ 2.17 against 1.72, 32³
/// 2.78 against 2.02; cgemm_ 28³ 1.25 against 1.28, 32³ 1.44 against
/// 1.35–1.94, 40³ 2.60 against 2.17. numpy's `a @ b` under the preload
/// in the second state, one thread against two (numpy's own OpenBLAS):
/// c64 40³ 3.5–3.6 against 3.3–5.0 (5.5), 48³ 5.2 against 4.0–6.6
/// (6.1–12.9), 64³ 10.6 against 6.9–9.7 (11.3–20.9); c128 32³ 3.7
/// against 3.1–5.7 (5.6), 48³ 9.4 against 6.1–10.4 (10.2–18.9).
pub const COMPLEX_STACKED_PARALLEL_FROM: (usize, usize) = (40, 32);

/// Each thread that shares a stacked complex product takes at least this
/// many of C's columns (rows of the real products' result).
pub const COMPLEX_STACKED_MIN_SHARE_ROWS: usize = 8;

/// Complex products on the CPU at the classical form with an interleaved
/// operand (numpy's and the BLAS's storage) run as real products of the
/// interleaved storage ([`crate::cpu::complex_direct`]) up to this
/// many multiply-adds (m·k·n), instead of four planned real products over
/// copied planes. On the 2-core Zen 5 guest, `fastmm.matmul` on numpy's
/// complex128 arrays: 2048³ 0.340 s this way against 0.373 s through the
/// planes, 4096³ 3.06 s against 2.50 s (its combining pass runs on one
/// thread; without the copy of B's parts, 3.10 s); numpy's `a @ b` under
/// the preload, through `complex::gemm` either way, 1.72× numpy at 1024
/// and 1.86× at 2048 this way, 1.12× and 1.19× through the planes (at
/// 4096 there, 2.90–2.95 s this way against 3.53–3.73 s: that path's
/// planes cost more than `fastmm.matmul`'s).
pub const COMPLEX_STACKED_MAX_VOLUME: usize = 2048 * 2048 * 2048;
