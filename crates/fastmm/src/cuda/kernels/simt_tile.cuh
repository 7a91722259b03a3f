// Prepended (after block_common.cuh) to the register-blocked SIMT kernels,
// fast.cu and fused.cu: their tile geometry, and the two loops they share,
// so that the fused Strassen kernel multiplies exactly as cuda-fast does.
//
// A block of THREADS threads (16 x 16) computes a BM x BN tile of C, each
// thread a TM x TN micro-tile held in registers, over k steps of BK staged
// in shared memory (A transposed, so both operands are read along rows). A
// thread's rows (and columns) come in groups of one 16-byte vector (four
// 4-byte or two 8-byte elements), the groups 16 vectors apart, so the 16
// threads along a row of the block read 16 consecutive vectors: 256 bytes
// without bank conflicts.
#define BM (16 * TM)
#define BN (16 * TN)
// k depth of one staged step: 16 for the 128-accumulator micro-tiles (half
// the barriers and staging per FMA; measured 1.5-2% faster than 8 on the
// H100), 8 for the smaller ones, whose shared tiles would not fit 48 KiB
// otherwise. A host that gives a kernel dynamic shared memory may set it.
#ifndef BK
#define BK (TM * TN > 64 ? 16 : 8)
#endif
#define THREADS 256

#define VEC (16 / (int)sizeof(ELEM))
// A thread's rows (columns) of its micro-tile: TM / VEC groups of VEC
// consecutive ones, GROUP_STRIDE apart.
#define GROUP_STRIDE (16 * VEC)
#define A_VECS_PER_ROW (BK / VEC)
#define B_VECS_PER_ROW (BN / VEC)
// 16-byte vectors of each tile per thread.
#define A_VECS (BM * BK / VEC / THREADS)
#define B_VECS (BN * BK / VEC / THREADS)
static_assert(TM % VEC == 0 && TN % VEC == 0 && A_VECS >= 1 && B_VECS >= 1 && A_VECS * VEC * THREADS == BM * BK &&
                  B_VECS * VEC * THREADS == BN * BK,
              "TM x TN must give every thread whole 16-byte vectors of both tiles");

// Where a thread works: its index, the origin (row0, col0) in C of its
// block's tile (block_common.cuh's grouped order) and its place (ty, tx)
// in the block's 16 x 16 grid of micro-tiles.
struct SimtPlace {
    int tid, row0, col0, ty, tx;
};

__device__ __forceinline__ SimtPlace simt_place_at(TileCoord tile)
{
    SimtPlace place;
    place.tid = threadIdx.x;
    place.row0 = tile.row * BM;
    place.col0 = tile.col * BN;
    place.ty = place.tid / 16;
    place.tx = place.tid % 16;
    return place;
}

__device__ __forceinline__ SimtPlace simt_place()
{
    return simt_place_at(raster_tile());
}

// Where a thread's 16-byte vectors of one staged step lie (the vector
// loads of fast_tile.cuh and fused.cu): its vector i of A's tile at row
// a_row + i·A_ROW_STEP, k offset a_p; its vector i of B's at k row
// b_p + i·B_ROW_STEP, column b_col.
struct SimtVectors {
    int a_row, a_p, b_p, b_col;
};
#define A_ROW_STEP (THREADS / A_VECS_PER_ROW)
#define B_ROW_STEP (THREADS / B_VECS_PER_ROW)

__device__ __forceinline__ SimtVectors simt_vectors(int tid)
{
    SimtVectors v;
    v.a_row = tid / A_VECS_PER_ROW;
    v.a_p = (tid % A_VECS_PER_ROW) * VEC;
    v.b_p = tid / B_VECS_PER_ROW;
    v.b_col = (tid % B_VECS_PER_ROW) * VEC;
    return v;
}

union Vec16 {
    uint4 raw;
    ELEM e[VEC];
};

// acc += (one staged step of A) x (one of B): the thread's TM x TN outer
// products over the BK rows of the shared tiles (A's rows A_LD elements
// apart: BM, or more where fast.cu pads them against bank conflicts).
template <int A_LD>
__device__ __forceinline__ void step_products(ACC (&acc)[TM][TN], const ELEM (*a)[A_LD], const ELEM (*b)[BN], int ty,
                                              int tx)
{
    ELEM ra[TM];
    ELEM rb[TN];
#pragma unroll
    for (int p = 0; p < BK; ++p) {
#pragma unroll
        for (int g = 0; g < TM / VEC; ++g)
#pragma unroll
            for (int r = 0; r < VEC; ++r) ra[g * VEC + r] = a[p][g * GROUP_STRIDE + ty * VEC + r];
#pragma unroll
        for (int g = 0; g < TN / VEC; ++g)
#pragma unroll
            for (int r = 0; r < VEC; ++r) rb[g * VEC + r] = b[p][g * GROUP_STRIDE + tx * VEC + r];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] += (ACC)ra[i] * (ACC)rb[j];
    }
}

// A's staged tile stored by rows instead of transposed, for the kernels
// that copy A with cp.async straight into place (fast_tile.cuh's
// a_layout): BM rows of BK elements, A_ROW_LD apart. The padding of one
// 16-byte vector puts the two rows a warp reads at once (ty and ty + 1,
// VEC rows apart) 2·A_ROW_LD elements apart (160 bytes for the 8-byte types
// that use it: 8 banks on), so their 16-byte reads share no bank.
#define A_ROW_LD (BK + VEC)
struct ARowsTile {
    ELEM e[BM][A_ROW_LD];
};

// acc += (one staged step of A, stored by rows) x (one of B): as
// step_products, but each 16-byte read of A brings VEC consecutive k of one
// of the thread's rows, so A takes as many reads and no transposing stores.
// All TM reads of A for those VEC k come first, then B's rows one k at a
// time.
__device__ __forceinline__ void step_products_rows(ACC (&acc)[TM][TN], const ARowsTile& a, const ELEM (*b)[BN], int ty,
                                                   int tx)
{
#pragma unroll
    for (int p0 = 0; p0 < BK; p0 += VEC) {
        Vec16 ra[TM];
#pragma unroll
        for (int i = 0; i < TM; ++i)
            ra[i].raw = *reinterpret_cast<const uint4*>(&a.e[(i / VEC) * GROUP_STRIDE + ty * VEC + i % VEC][p0]);
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
            ELEM rb[TN];
#pragma unroll
            for (int g = 0; g < TN / VEC; ++g)
#pragma unroll
                for (int r = 0; r < VEC; ++r) rb[g * VEC + r] = b[p0 + v][g * GROUP_STRIDE + tx * VEC + r];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += (ACC)ra[i].e[v] * (ACC)rb[j];
        }
    }
}

// One staged step's products, for either layout of A's tile.
__device__ __forceinline__ void staged_products(ACC (&acc)[TM][TN], const ELEM (&a)[BK][BM], const ELEM (*b)[BN], int ty,
                                                int tx)
{
    step_products<BM>(acc, a, b, ty, tx);
}
__device__ __forceinline__ void staged_products(ACC (&acc)[TM][TN], const ARowsTile& a, const ELEM (*b)[BN], int ty,
                                                int tx)
{
    step_products_rows(acc, a, b, ty, tx);
}

// Element (row, p) of A's staged tile, for either layout.
__device__ __forceinline__ ELEM& a_at(ELEM (&a)[BK][BM], int row, int p)
{
    return a[p][row];
}
__device__ __forceinline__ ELEM& a_at(ARowsTile& a, int row, int p)
{
    return a.e[row][p];
}

// The k loop over double-buffered shared tiles: fetch(p0, buffer) starts
// loading step p0 into a buffer, stage(p0, buffer) completes it after the
// current step's products; one barrier per step.
//
// TWO_STEPS runs two steps per trip of the loop, one on each buffer, so
// that every shared address is a constant offset from one base. With one
// step per trip the buffer alternates at run time, and ptxas rebuilt the
// shared addresses every step, reading the shared window's base
// (S2R SR_CgaCtaId) each time: ncu put 1.2% of the 128 x 256 kernel's stall
// samples on that read, and as much again on the barrier behind it. Two
// steps per trip measured 1.8% (4096^3), 3.6% (8192^3) and 3% (16384^3)
// faster on the H100 for f32 (253 registers instead of 231) and 3% at
// 8192^3 f64 (8 x 4, still 128), but the loop's code doubles (75 KB for the
// 8 x 16 tile). fast.cu runs two steps; the stream-K kernel, whose
// instruction-cache stalls tripled with them (and whose f64 8 x 4 variant
// spilled under the 128-register cap), and fused.cu keep one.
template <bool TWO_STEPS, typename ATile, typename Fetch, typename Stage>
__device__ __forceinline__ void k_loop(ACC (&acc)[TM][TN], ATile* a_tile, ELEM (*b_tile)[BK][BN], int k,
                                       int ty, int tx, Fetch&& fetch, Stage&& stage)
{
    fetch(0, 0);
    stage(0, 0);
    __syncthreads();
    if (TWO_STEPS) {
        // One step: fetch the next into the other buffer, multiply this
        // one, complete the next; false when this was the last.
        auto step = [&](int p0, int buf) {
            const bool more = p0 + BK < k;
            if (more) fetch(p0 + BK, buf ^ 1);
            staged_products(acc, a_tile[buf], b_tile[buf], ty, tx);
            if (more) {
                // The other buffer was last read before the previous barrier.
                stage(p0 + BK, buf ^ 1);
                __syncthreads();
            }
            return more;
        };
        for (int p0 = 0; step(p0, 0) && step(p0 + BK, 1); p0 += 2 * BK) {
        }
        return;
    }
    // Written out rather than through `step`: every form through it that
    // was tried changed these kernels' SASS, which this loop keeps as
    // measured.
    int buf = 0;
    for (int p0 = 0; p0 < k; p0 += BK) {
        const bool more = p0 + BK < k;
        if (more) fetch(p0 + BK, buf ^ 1);
        staged_products(acc, a_tile[buf], b_tile[buf], ty, tx);
        if (more) {
            stage(p0 + BK, buf ^ 1);
            __syncthreads();
            buf ^= 1;
        }
    }
}

// Calls write(i, j, gi, gj) for each element (i, j) of the thread's
// micro-tile that lies inside the m x n matrix, at its row gi and column gj.
template <typename Write>
__device__ __forceinline__ void for_each_inside(int row0, int col0, int m, int n, int ty, int tx, Write&& write)
{
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int gi = row0 + (i / VEC) * GROUP_STRIDE + ty * VEC + i % VEC;
        if (gi >= m) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int gj = col0 + (j / VEC) * GROUP_STRIDE + tx * VEC + j % VEC;
            if (gj >= n) continue;
            write(i, j, gi, gj);
        }
    }
}
