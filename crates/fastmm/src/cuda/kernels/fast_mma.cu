// C <- alpha*A*B + beta*C in f64 on the FP64 tensor cores (sm_90+):
// mma.sync.aligned.m16n8k8.row.col.f64, the instruction cuBLAS's dgemm
// uses on Hopper (there is no f64 wgmma).
//
// Hierarchy: a block of 256 threads computes a 128x128 tile of C; each of
// its 8 warps a 64x32 warp tile (2 x 4 warps), as 4 x 4 mma tiles of 16x8
// whose accumulators (4 doubles per thread each) stay in registers. k runs
// in steps of BK = 8, one mma deep.
//
// Staging: STAGES = 3 shared-memory buffers filled with cp.async (16 bytes
// per copy, bypassing L1), so two steps are in flight while one is
// multiplied, with one barrier per step. A is kept row-major (BM x BK) and
// B row-major (BK x BN), as in global memory; their 16-byte chunks are
// XOR-swizzled so that the fragment loads of a half-warp (rows g = 0..3,
// columns t = 0..3 of A; rows t, columns g of B) hit 16 distinct banks.
//
// Edges: blocks whose tile lies inside the matrices (and whose rows the
// host found 16-byte aligned: vec_ok) use cp.async; others, and the last
// partial k step, use guarded scalar loads that zero-fill, so any m, n, k
// works. Split-K as in fast.cu (blockIdx.z slice, k_slice a multiple of
// BK). beta == 0 never reads C.
//
// Tiles are assigned to blocks in block_common.cuh's grouped order (prepended).
//
// Built by NVRTC with -DELEM=double -DACC=double -DSTAGES=3.
#define BM 128
#define BN 128
#define BK 8
#define THREADS 256
#define WM 64
#define WN 32
#define WARPS_N (BN / WN)
#define MI (WM / 16)
#define NI (WN / 8)

// Element (row, col) of a swizzled tile: chunk (col / 2) of the row XORed
// with a row-dependent mask below 4 (A) or 8 (B), so it stays in the row.
__device__ __forceinline__ int a_slot(int row, int col)
{
    return row * BK + ((((col >> 1) ^ (row & 2))) << 1) + (col & 1);
}
__device__ __forceinline__ int b_slot(int row, int col)
{
    return row * BN + ((((col >> 1) ^ ((row & 3) << 1))) << 1) + (col & 1);
}

__device__ __forceinline__ void mma16x8x8(double* d, const double* a, const double* b)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}

// One block per SM: the accumulators alone take 128 registers.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_fast_mma(int m, int n, int k, ELEM alpha, const ELEM* __restrict__ a, long long lda,
              const ELEM* __restrict__ b, long long ldb, ELEM beta, ELEM* __restrict__ c,
              long long ldc, int vec_ok, int k_slice, long long c_slice, int tile_limit)
{
    SKIP_TILES_FROM(tile_limit);
    ENTER_K_SLICE();
    // 3 x (8 + 8) KiB: the static limit of 48 KiB exactly.
    __shared__ __align__(16) double a_tile[STAGES][BM * BK];
    __shared__ __align__(16) double b_tile[STAGES][BK * BN];
    const int tid = threadIdx.x;
    const int lane = tid % 32, warp = tid / 32;
    const int g = lane >> 2, t = lane & 3;
    const int warp_row = (warp / WARPS_N) * WM, warp_col = (warp % WARPS_N) * WN;
    const TileCoord tile = raster_tile();
    const int row0 = tile.row * BM, col0 = tile.col * BN;
    const bool inside = vec_ok && row0 + BM <= m && col0 + BN <= n;

    // Fills buffer s with k step p0: two 16-byte chunks of A and two of B
    // per thread (chunk v: A row v / 4, columns 2(v % 4)..; B row v / 64,
    // columns 2(v % 64)..).
    auto load = [&](int s, int p0) {
        if (inside && p0 + BK <= k) {
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int v = tid + i * THREADS;
                const int ar = v / (BK / 2), ac = (v % (BK / 2)) * 2;
                copy_async16(&a_tile[s][a_slot(ar, ac)], a + (long long)(row0 + ar) * lda + p0 + ac);
                const int br = v / (BN / 2), bc = (v % (BN / 2)) * 2;
                copy_async16(&b_tile[s][b_slot(br, bc)], b + (long long)(p0 + br) * ldb + col0 + bc);
            }
        } else {
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int v = tid + i * THREADS;
                const int ar = v / (BK / 2), ac = (v % (BK / 2)) * 2;
                const int br = v / (BN / 2), bc = (v % (BN / 2)) * 2;
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int gi = row0 + ar, gp = p0 + ac + e;
                    a_tile[s][a_slot(ar, ac + e)] =
                        (gi < m && gp < k) ? a[(long long)gi * lda + gp] : 0.0;
                    const int hp = p0 + br, gj = col0 + bc + e;
                    b_tile[s][b_slot(br, bc + e)] =
                        (hp < k && gj < n) ? b[(long long)hp * ldb + gj] : 0.0;
                }
            }
        }
    };

    double acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0;

    const int steps = (k + BK - 1) / BK;
    // Prologue: the first STAGES - 1 steps in flight. Every iteration
    // commits one group (possibly empty) so that wait_group counts steps.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < steps) load(s, s * BK);
        commit_async_copies();
    }
    for (int step = 0; step < steps; ++step) {
        // Step `step` has landed (at most STAGES - 2 younger groups
        // pending); the barrier also means every warp is done with the
        // buffer the next load overwrites, read at step - 1.
        wait_async_groups<STAGES - 2>();
        __syncthreads();
        const int ahead = step + STAGES - 1;
        if (ahead < steps) load(ahead % STAGES, ahead * BK);
        commit_async_copies();

        const double* as = a_tile[step % STAGES];
        const double* bs = b_tile[step % STAGES];
        double af[MI][4], bf[NI][2];
#pragma unroll
        for (int i = 0; i < MI; ++i) {
            const int r = warp_row + i * 16 + g;
            af[i][0] = as[a_slot(r, t)];
            af[i][1] = as[a_slot(r + 8, t)];
            af[i][2] = as[a_slot(r, t + 4)];
            af[i][3] = as[a_slot(r + 8, t + 4)];
        }
#pragma unroll
        for (int j = 0; j < NI; ++j) {
            const int col = warp_col + j * 8 + g;
            bf[j][0] = bs[b_slot(t, col)];
            bf[j][1] = bs[b_slot(t + 4, col)];
        }
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int j = 0; j < NI; ++j) mma16x8x8(acc[i][j], af[i], bf[j]);
    }
    wait_async_groups<0>();

    // Accumulator r of mma tile (i, j): row g (+8 for r >= 2), column
    // 2t + (r & 1) of the 16x8 tile.
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int gi = row0 + warp_row + i * 16 + g + (r >> 1) * 8;
                const int gj = col0 + warp_col + j * 8 + 2 * t + (r & 1);
                if (gi < m && gj < n) {
                    double result = alpha * acc[i][j][r];
                    if (beta != 0.0) result += beta * c[(long long)gi * ldc + gj];
                    c[(long long)gi * ldc + gj] = result;
                }
            }
}
