//! The one launch path of the kernels of `kernels/`: the arguments every
//! product kernel begins with, the passes of a [`FastSchedule`] (split-K,
//! wave tail, stream-K), and the combine kernel that adds slices and
//! linear combinations.

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaFunction, DevicePtr, LaunchArgs, LaunchConfig, PushKernelArg};

use crate::cuda::kernels::gemm::schedule::{FastSchedule, StreamK};
use crate::cuda::kernels::gemm::{to_i32, DeviceGemm, Operand, TileKernel};
use crate::cuda::runtime::compile::{KernelKey, KernelSource};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::tunables::{CUDA_COMBINE_ROWS_PER_BLOCK, CUDA_FAST_BK};
use crate::element::Element;
use crate::error::Error;

/// Launches a kernel of `kernels/` for c ← α·a·b + β·c (β = 0 never reads
/// c); `fast` is cuda-fast's combine kernel, whose main kernel takes the
/// alignment flag, the split-K arguments and the wave-tail limit, and
/// runs the [`FastSchedule`] of the product.
pub(crate) fn launch_tile_kernel<T: Element>(
    gpu: &Gpu,
    kernel: &TileKernel,
    fast: Option<&CudaFunction>,
    product: DeviceGemm<T>,
) -> Result<(), Error> {
    if product.any_transposed() || product.c.trans {
        // The resident products copy transposed views row-major before
        // they reach a tile kernel (`ClassicalGemm::takes_transposed`).
        return Err(Error::Unsupported {
            algorithm: "cuda kernels",
            what: "a transposed operand (the tile kernels read row-major operands)".into(),
        });
    }
    let (m, k, n) = product.shape;
    let aligned = rows_aligned::<T>(&product.a) && rows_aligned::<T>(&product.b);
    // The schedule `FastConfig::schedule` reports is the one that runs.
    let schedule = match (kernel.config, fast) {
        (Some(config), Some(_)) => config.schedule(gpu, (m, k, n), aligned)?,
        _ => FastSchedule::Tiles,
    };
    let pass = |product, slices, tile_limit| {
        launch_pass(gpu, (kernel, fast), product, (slices, tile_limit))
    };
    match schedule {
        FastSchedule::Tiles => pass(product, 1, usize::MAX),
        FastSchedule::SplitK(slices) => pass(product, slices, usize::MAX),
        FastSchedule::WaveTail(tail) => {
            // The main launch skips the tail's tiles, which are disjoint
            // from its own, so the two passes may run in either order.
            pass(product, 1, tail.first_tile)?;
            let (row0, col0) = (
                tail.origin.0 * kernel.block.0,
                tail.origin.1 * kernel.block.1,
            );
            let tail_product = product.block((row0, 0, col0), (m - row0, k, n - col0));
            pass(tail_product, tail.slices, usize::MAX)
        }
        FastSchedule::StreamK(plan) => {
            let key = kernel
                .config
                .and_then(|config| config.stream_key())
                .expect("stream-K is planned only with its kernel");
            launch_stream_k(gpu, (key, kernel), plan, product)
        }
    }
}

/// The arguments every kernel of `kernels/` that multiplies begins with:
/// `int m, int n, int k, ELEM alpha, const ELEM* a, long long lda, const
/// ELEM* b, long long ldb, ELEM beta, ELEM* c, long long ldc`.
struct GemmArgs<T> {
    m: i32,
    n: i32,
    k: i32,
    alpha: T,
    a: CUdeviceptr,
    lda: i64,
    b: CUdeviceptr,
    ldb: i64,
    beta: T,
    c: CUdeviceptr,
    ldc: i64,
}

impl<T: Element> GemmArgs<T> {
    fn new(
        (m, k, n): (i32, i32, i32),
        alpha: T,
        a: Operand,
        b: Operand,
        beta: T,
        c: Operand,
    ) -> Self {
        GemmArgs {
            m,
            n,
            k,
            alpha,
            a: a.ptr,
            lda: a.ld as i64,
            b: b.ptr,
            ldb: b.ld as i64,
            beta,
            c: c.ptr,
            ldc: c.ld as i64,
        }
    }

    /// Pushes them, in the kernels' order, onto a launch.
    fn push<'a>(&'a self, launch: &mut LaunchArgs<'a>) {
        launch
            .arg(&self.m)
            .arg(&self.n)
            .arg(&self.k)
            .arg(&self.alpha)
            .arg(&self.a)
            .arg(&self.lda)
            .arg(&self.b)
            .arg(&self.ldb)
            .arg(&self.beta)
            .arg(&self.c)
            .arg(&self.ldc);
    }
}

/// A launch of `function` with the product arguments `args` pushed; the
/// caller pushes the kernel's own after them and calls [`submit`].
fn product_launch<'a, T: Element>(
    gpu: &'a Gpu,
    function: &'a CudaFunction,
    args: &'a GemmArgs<T>,
) -> LaunchArgs<'a> {
    let mut launch = gpu.stream.launch_builder(function);
    args.push(&mut launch);
    launch
}

/// Launches on `config`, the error saying `what` failed.
///
/// # Safety
/// The pushed arguments match the kernel's parameters in order and type;
/// every pointer among them addresses memory the kernel may read or write
/// as it does for the shapes and leading dimensions pushed, and `config`
/// is a grid the kernel accepts.
pub(crate) unsafe fn submit(
    mut launch: LaunchArgs<'_>,
    config: LaunchConfig,
    what: &str,
) -> Result<(), Error> {
    // SAFETY: the caller's contract.
    unsafe { launch.launch(config) }
        .map(|_| ())
        .map_err(|e| cuda_err(what, e))
}

/// Whether every row of `o` starts on a 16-byte boundary, so that
/// whole-vector loads of its rows are aligned.
fn rows_aligned<T>(o: &Operand) -> bool {
    let lanes = 16 / std::mem::size_of::<T>();
    o.ptr.is_multiple_of(16) && o.ld.is_multiple_of(lanes)
}

/// The two launches of a [`StreamK`] schedule (`kernels/fast_stream.cu`):
/// the tiles and workers, then the fix-up that adds the split tiles'
/// pieces into c with α and β. A and B rows are 16-byte aligned.
fn launch_stream_k<T: Element>(
    gpu: &Gpu,
    (key, kernel): (KernelKey, &TileKernel),
    plan: StreamK,
    DeviceGemm {
        shape: (m, k, n),
        alpha,
        a,
        b,
        beta,
        c,
    }: DeviceGemm<T>,
) -> Result<(), Error> {
    let (mi, ki, ni) = (to_i32("m", m)?, to_i32("k", k)?, to_i32("n", n)?);
    let (block_rows, block_cols) = kernel.block;
    let tiles_m = to_i32("tile rows", m.div_ceil(block_rows))?;
    let tiles_n = to_i32("tile columns", n.div_ceil(block_cols))?;
    let sk_first = to_i32("whole tiles", plan.sk_first)?;
    let sk_tiles = to_i32("stream-K tiles", plan.sk_tiles)?;
    let workers = to_i32("stream-K blocks", plan.workers)?;
    let grid = to_i32("stream-K grid", plan.sk_first + plan.workers)?;
    // Two slots of one tile's accumulators per worker (ACC is as wide as
    // T for every type).
    let slots = 2 * plan.workers * block_rows * block_cols;
    // SAFETY: a worker writes a slot whole before the fix-up, which runs
    // after it on the same stream, reads it.
    let partials = unsafe { gpu.stream.alloc::<T>(slots) }
        .map_err(|e| cuda_err("cannot allocate the stream-K workspace", e))?;
    let partials_ptr = partials.device_ptr(&gpu.stream).0;
    let args = GemmArgs::new((mi, ki, ni), alpha, a, b, beta, c);
    let vec_ok = 1i32;
    let main = gpu.entry_function(key, key.source.entry())?;
    let config = |blocks: i32| LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (kernel.threads.0, kernel.threads.1, 1),
        shared_mem_bytes: 0,
    };
    let mut main_launch = product_launch(gpu, &main, &args);
    main_launch
        .arg(&vec_ok)
        .arg(&tiles_m)
        .arg(&tiles_n)
        .arg(&sk_first)
        .arg(&sk_tiles)
        .arg(&workers)
        .arg(&partials_ptr);
    // SAFETY: gemm_fast_stream takes the product arguments, then int
    // vec_ok, int ×5 and an ACC pointer; every row of A and B is 16-byte
    // aligned (the caller's schedule), the operands address m×k, k×n and
    // m×n row-major blocks with those leading dimensions, the tile grid
    // is C's, and the workspace holds 2·workers tiles.
    unsafe { submit(main_launch, config(grid), "stream-K launch failed") }?;
    let fixup = gpu.entry_function(key, KernelSource::STREAM_FIXUP_ENTRY)?;
    let mut launch = gpu.stream.launch_builder(&fixup);
    launch
        .arg(&args.m)
        .arg(&args.n)
        .arg(&args.k)
        .arg(&args.alpha)
        .arg(&args.beta)
        .arg(&args.c)
        .arg(&args.ldc)
        .arg(&tiles_m)
        .arg(&tiles_n)
        .arg(&sk_first)
        .arg(&sk_tiles)
        .arg(&workers)
        .arg(&partials_ptr);
    // SAFETY: the arguments match gemm_fast_stream_fixup's signature (int
    // ×3, ELEM ×2, pointer, long long, int ×5, ACC pointer), with the same
    // plan as the launch before it on this stream, whose pieces it reads.
    unsafe { submit(launch, config(sk_tiles), "stream-K fix-up launch failed") }
}

/// One launch of a kernel of `kernels/` (and, with split-K, the combine
/// that adds its slices into c): c ← α·a·b + β·c over k in `slices`
/// slices; blocks from grouped index `tile_limit` on skip their tiles.
fn launch_pass<T: Element>(
    gpu: &Gpu,
    (kernel, fast): (&TileKernel, Option<&CudaFunction>),
    DeviceGemm {
        shape: (m, k, n),
        alpha,
        a,
        b,
        beta,
        c,
    }: DeviceGemm<T>,
    (slices, tile_limit): (usize, usize),
) -> Result<(), Error> {
    let (mi, ki, ni) = (to_i32("m", m)?, to_i32("k", k)?, to_i32("n", n)?);
    let (block_rows, block_cols) = kernel.block;
    let grid_y = m.div_ceil(block_rows);
    if grid_y > gpu.info().max_grid_y {
        return Err(Error::Unsupported {
            algorithm: "CUDA kernels",
            what: format!(
                "{m} rows in blocks of {block_rows} (grid y {grid_y} over the device's {})",
                gpu.info().max_grid_y
            ),
        });
    }
    let aligned = rows_aligned::<T>(&a) && rows_aligned::<T>(&b);
    // Unaligned operands would put fast.cu on its synchronous scalar
    // loads in every step: its fast_ring.cu twin copies them
    // asynchronously instead, and needs only B aligned for its vectors.
    let ring = match (fast, kernel.ring) {
        (Some(_), Some(ring)) if !aligned => Some(ring),
        _ => None,
    };
    let (function, shared_bytes, vec_ok) = match ring {
        Some(ring) => {
            let function = gpu.function_with_shared(ring.key, ring.shared_bytes, "cuda-fast")?;
            (
                function,
                ring.shared_bytes as u32,
                rows_aligned::<T>(&b) as i32,
            )
        }
        None if kernel.any_alignment => (
            kernel.function.clone(),
            kernel.shared_bytes,
            rows_aligned::<T>(&b) as i32,
        ),
        None => (kernel.function.clone(), kernel.shared_bytes, aligned as i32),
    };
    let k_slice = k.div_ceil(slices).div_ceil(CUDA_FAST_BK) * CUDA_FAST_BK;
    let slices = k.div_ceil(k_slice);
    // Split-K: the slices go to a workspace, one m×n block each,
    // and are then added into C with α and β.
    let workspace = if slices > 1 {
        // SAFETY: every slice is written whole by the kernel
        // (β = 0 on the workspace) before the combine reads it.
        let buffer = unsafe { gpu.stream.alloc::<T>(slices * m * n) }
            .map_err(|e| cuda_err("cannot allocate the split-K workspace", e))?;
        Some(buffer)
    } else {
        None
    };
    let (target, kernel_alpha, kernel_beta) = match &workspace {
        Some(buffer) => (
            Operand::row_major(buffer.device_ptr(&gpu.stream).0, n),
            T::ONE,
            T::ZERO,
        ),
        None => (c, alpha, beta),
    };
    let args = GemmArgs::new((mi, ki, ni), kernel_alpha, a, b, kernel_beta, target);
    let config = LaunchConfig {
        grid_dim: (n.div_ceil(block_cols) as u32, grid_y as u32, slices as u32),
        block_dim: (kernel.threads.0, kernel.threads.1, 1),
        shared_mem_bytes: shared_bytes,
    };
    let k_slice_i = to_i32("k slice", k_slice)?;
    let tile_limit_i = tile_limit.min(i32::MAX as usize) as i32;
    let c_slice = (m * n) as i64;
    let mut pass = product_launch(gpu, &function, &args);
    if fast.is_some() {
        pass.arg(&vec_ok)
            .arg(&k_slice_i)
            .arg(&c_slice)
            .arg(&tile_limit_i);
    }
    // SAFETY: the arguments match the kernel's signature (int ×3,
    // ELEM, pointer, long long, pointer, long long, ELEM,
    // pointer, long long, and for cuda-fast `int vec_ok`, `int
    // k_slice`, `long long c_slice`, `int tile_limit`, which only
    // makes blocks return early; `vec_ok` is true only when
    // every row of A and B (fast_ring.cu: of B) starts 16-byte
    // aligned; fast_ring.cu's dynamic shared memory is the size
    // its stages take and was allowed above; with split-K
    // the target holds `slices` m×n blocks c_slice apart), and
    // the caller's operands address m×k, k×n and m×n row-major
    // blocks with those leading dimensions.
    unsafe { submit(pass, config, "kernel launch failed") }?;
    if let (Some(combine), Some(buffer)) = (fast, &workspace) {
        let base = buffer.device_ptr(&gpu.stream).0;
        let size = std::mem::size_of::<T>() as u64;
        let terms: Vec<(T, Operand)> = (0..slices)
            .map(|s| {
                let ptr = base + (s * m * n) as u64 * size;
                (alpha, Operand::row_major(ptr, n))
            })
            .collect();
        // SAFETY: C is the caller's m×n block; each term is one
        // m×n slice of the workspace, which C does not overlap.
        unsafe { launch_combine(gpu, combine, beta, c, (m, n), &terms) }?;
    }
    Ok(())
}

/// Terms one launch of the combine kernel adds.
const COMBINE_TERMS_PER_LAUNCH: usize = 4;

/// The grid of the elementwise kernels of `combine.cu` and
/// `combine_group.cu` over a rows×cols block: one thread per element,
/// blocks of 32 × `CUDA_COMBINE_ROWS_PER_BLOCK`.
pub(crate) fn combine_launch_config(rows: usize, cols: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            cols.div_ceil(32) as u32,
            rows.div_ceil(CUDA_COMBINE_ROWS_PER_BLOCK) as u32,
            1,
        ),
        block_dim: (32, CUDA_COMBINE_ROWS_PER_BLOCK as u32, 1),
        shared_mem_bytes: 0,
    }
}

/// dst ← keep·dst + Σ wᵢ·srcᵢ over a rows×cols block with `combine.cu`
/// (`combine`, compiled for T), four terms per launch; keep = 0 never
/// reads dst.
///
/// # Safety
/// `dst` and every source address rows×cols blocks with their leading
/// dimensions, of element type T, and dst overlaps no source.
pub(crate) unsafe fn launch_combine<T: Element>(
    gpu: &Gpu,
    combine: &CudaFunction,
    keep: T,
    dst: Operand,
    (rows, cols): (usize, usize),
    terms: &[(T, Operand)],
) -> Result<(), Error> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let (rows_i, cols_i) = (to_i32("rows", rows)?, to_i32("cols", cols)?);
    let config = combine_launch_config(rows, cols);
    let mut keep = keep;
    let mut chunks: Vec<&[(T, Operand)]> = terms.chunks(COMBINE_TERMS_PER_LAUNCH).collect();
    if chunks.is_empty() {
        chunks.push(&[]);
    }
    let ldd = dst.ld as i64;
    for chunk in chunks {
        let mut ptrs = [dst.ptr; COMBINE_TERMS_PER_LAUNCH];
        let mut lds = [0i64; COMBINE_TERMS_PER_LAUNCH];
        let mut weights = [T::ZERO; COMBINE_TERMS_PER_LAUNCH];
        for (t, &(w, source)) in chunk.iter().enumerate() {
            ptrs[t] = source.ptr;
            lds[t] = source.ld as i64;
            weights[t] = w;
        }
        let count = chunk.len() as i32;
        let mut launch = gpu.stream.launch_builder(combine);
        launch
            .arg(&rows_i)
            .arg(&cols_i)
            .arg(&keep)
            .arg(&dst.ptr)
            .arg(&ldd)
            .arg(&count);
        for t in 0..COMBINE_TERMS_PER_LAUNCH {
            launch.arg(&ptrs[t]).arg(&lds[t]).arg(&weights[t]);
        }
        // SAFETY: the arguments match `combine`'s signature; the blocks are
        // the caller's (contract above); unused term slots are never read
        // (count).
        unsafe { submit(launch, config, "combine kernel launch failed") }?;
        // Later chunks add onto what the first wrote.
        keep = T::ONE;
    }
    Ok(())
}
