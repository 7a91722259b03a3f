// Prepended (after block_common.cuh and simt_tile.cuh, which has the tile
// geometry and the inner loops) to fast.cu and fast_stream.cu: the product
// of one register-blocked tile of C over one range of k, and the store of a
// finished tile, so that the plain and the stream-K launches multiply
// exactly alike. (Groups of four 8-byte elements per thread made every
// 16-byte load of B a 4-way conflict.)
//
// Shapes: TM x TN = 8 x 16 gives 128 x 256 tiles (128 accumulators, one
// block per SM: cuBLAS's SIMT sgemm tile on Hopper, its long side along B's
// contiguous rows, so only a 128-row tile of A goes through the transposing
// stores); 16 x 8 gives 256 x 128; 8 x 8 gives 128 x 128 and 4 x 4 gives
// 64 x 64 (8-byte types, two blocks per SM).
//
// Global loads: every thread fetches A_VECS 16-byte vectors of A and
// B_VECS of B per k step when the block's tiles lie inside the matrices and
// the host said the rows are 16-byte aligned (vec_ok). A's vectors go
// through registers (fetched before the current step's products, stored
// transposed after them; the f64 kernels capped at 128 registers copy them
// with cp.async instead, see A_ASYNC); B's
// go straight to shared memory with cp.async on sm_80+ (through registers
// before that). Edge steps use guarded scalar
// loads that zero-fill, stored at once, so any m, n, k works. The shared
// tiles are double-buffered, so one barrier per step suffices. When the
// rows are not 16-byte aligned every step would be an edge step: the host
// runs fast_ring.cu instead, which copies such operands asynchronously.
//
// Built by NVRTC with -DELEM, -DACC (unsigned for integers, so overflow
// wraps), -DTM and -DTN. beta == 0 never reads C.
#define USE_ASYNC_B HAS_CP_ASYNC
// Two blocks per SM (at most 128 registers per thread) while the
// accumulators take at most 64 registers.
#define MIN_BLOCKS (TM * TN * (int)sizeof(ACC) > 256 ? 1 : 2)
// The f64 kernels held to 128 registers fetch A with cp.async instead of
// through registers. Through registers, ptxas copied the loaded vectors to
// other registers right after the loads (to free them for the products),
// and that copy waited out the whole global latency every k step: 17% of
// the stall samples of 4096^3 f64, all "long scoreboard" (ncu source
// counters). i64's 4x4 kernel ran 0.7% slower without the registers, so
// integers keep them. ((ELEM)0.5 != 0 tells floats from integers.)
//
// Where the copies go (a_layout below): straight into a shared tile stored
// by rows (simt_tile.cuh's ARowsTile), or into per-thread slots of shared
// memory, read back after the step's products and stored transposed. The
// slots cost two more passes over A through shared memory, whose pipe the
// f64 fragment reads keep about half busy by our count: the row layout
// ran 3.9% faster
// at 4096^3 (8 x 4, stream-K's one-step loop) and 7% at 1024^3 (4 x 4) on
// the H100. The 8 x 4 two-step loop keeps the slots: reading A along k
// holds VEC k steps of A's fragment at once, and under the 128-register
// cap ptxas spilled it, or, reading one row of A at a time, shuffled
// accumulators between registers and ran 5-6% slower at 8192^3.
#define A_ASYNC (USE_ASYNC_B && sizeof(ELEM) == 8 && (ELEM)0.5 != (ELEM)0 && MIN_BLOCKS == 2)

enum ALayout { A_TRANSPOSED_FROM_REGISTERS, A_TRANSPOSED_FROM_SLOTS, A_BY_ROWS };

__host__ __device__ constexpr ALayout a_layout(bool two_steps)
{
    return !A_ASYNC ? A_TRANSPOSED_FROM_REGISTERS : (two_steps && TM > 4) ? A_TRANSPOSED_FROM_SLOTS : A_BY_ROWS;
}

// The type of A's staged tile for each layout.
template <bool BY_ROWS>
struct ATileOf {
    typedef ELEM type[BK][BM];
};
template <>
struct ATileOf<true> {
    typedef ARowsTile type;
};

// acc <- A[row0 .. row0+BM, 0 .. k) * B[0 .. k, col0 .. col0+BN) for this
// thread's micro-tile (zero outside the m x n product), `place` giving the
// tile. a and b address the first column of A and row of B of this range of
// k: a multiple of BK into the matrices, so 16-byte rows stay aligned. The
// shared tiles are free on entry and on return; a block that runs several
// tiles puts a barrier between them. TWO_STEPS: see k_loop.
template <bool TWO_STEPS>
__device__ __forceinline__ void fast_tile_product(ACC (&acc)[TM][TN], int m, int n, int k,
                                                  const ELEM* __restrict__ a, long long lda,
                                                  const ELEM* __restrict__ b, long long ldb, int vec_ok,
                                                  const SimtPlace& place)
{
    constexpr ALayout LAYOUT = a_layout(TWO_STEPS);
    __shared__ __align__(16) typename ATileOf<LAYOUT == A_BY_ROWS>::type a_tile[2];
    __shared__ __align__(16) ELEM b_tile[2][BK][BN];
    // A's vectors of the step being fetched, each thread its own (unused
    // unless A_TRANSPOSED_FROM_SLOTS).
    __shared__ __align__(16) uint4 a_slots[LAYOUT == A_TRANSPOSED_FROM_SLOTS ? A_VECS * THREADS : 1];
    const int tid = place.tid, row0 = place.row0, col0 = place.col0, ty = place.ty, tx = place.tx;
    const SimtVectors vectors = simt_vectors(tid);
    const int a_row = vectors.a_row, a_p = vectors.a_p, b_p = vectors.b_p, b_col = vectors.b_col;
    const int a_row_step = A_ROW_STEP, b_row_step = B_ROW_STEP;
    const bool rows_inside = vec_ok && row0 + BM <= m && col0 + BN <= n;

#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0;

    // Interior steps load A's vectors into registers (or into this thread's
    // slots), stored transposed after the step's products (or copy them
    // straight into place, A_BY_ROWS), and B's straight into shared memory with cp.async where the
    // architecture has it (else through registers too).
    // Edge steps store their guarded scalar loads at once: the target
    // buffer is free, and no registers stay live across the products.
    Vec16 next_a[A_VECS];
#if !USE_ASYNC_B
    Vec16 next_b[B_VECS];
#endif
    bool pending = false;
    // The interior path addresses step p0 from one base pointer per
    // operand (recomputing 64-bit offsets per step costs registers).
    const ELEM* a_walk = a + (long long)(row0 + a_row) * lda + a_p;
    const ELEM* b_walk = b + (long long)b_p * ldb + col0 + b_col;
    const long long b_step = BK * ldb;
    // Starts loading step p0 into shared buffer `target` (zero outside).
    auto fetch = [&](int p0, int target) {
        pending = rows_inside && p0 + BK <= k;
        if (pending) {
#pragma unroll
            for (int i = 0; i < A_VECS; ++i) {
                const ELEM* src = a_walk + i * a_row_step * lda + p0;
                if (LAYOUT == A_BY_ROWS) {
                    copy_async16(&a_at(a_tile[target], a_row + i * a_row_step, a_p), src);
                } else if (LAYOUT == A_TRANSPOSED_FROM_SLOTS) {
                    copy_async16(&a_slots[i * THREADS + tid], src);
                } else {
                    next_a[i].raw = *reinterpret_cast<const uint4*>(src);
                }
            }
#pragma unroll
            for (int i = 0; i < B_VECS; ++i) {
                const ELEM* src = b_walk + i * b_row_step * ldb + (p0 / BK) * b_step;
#if USE_ASYNC_B
                copy_async16(&b_tile[target][b_p + i * b_row_step][b_col], src);
#else
                next_b[i].raw = *reinterpret_cast<const uint4*>(src);
#endif
            }
        } else {
#pragma unroll
            for (int i = 0; i < A_VECS; ++i)
#pragma unroll
                for (int v = 0; v < VEC; ++v) {
                    const int gi = row0 + a_row + i * a_row_step, gp = p0 + a_p + v;
                    a_at(a_tile[target], a_row + i * a_row_step, a_p + v) =
                        (gi < m && gp < k) ? a[gi * lda + gp] : (ELEM)0;
                }
#pragma unroll
            for (int i = 0; i < B_VECS; ++i)
#pragma unroll
                for (int v = 0; v < VEC; ++v) {
                    const int hp = p0 + b_p + i * b_row_step, gj = col0 + b_col + v;
                    b_tile[target][b_p + i * b_row_step][b_col + v] =
                        (hp < k && gj < n) ? b[hp * ldb + gj] : (ELEM)0;
                }
        }
    };
    // Completes step p0's loads into `target` (before the barrier).
    auto stage = [&](int target) {
        if (pending) {
            if (LAYOUT == A_TRANSPOSED_FROM_SLOTS) {
                // A thread reads back only its own slots: no barrier needed.
                wait_async_copies();
#pragma unroll
                for (int i = 0; i < A_VECS; ++i) next_a[i].raw = a_slots[i * THREADS + tid];
            }
            if (LAYOUT != A_BY_ROWS) {
#pragma unroll
                for (int i = 0; i < A_VECS; ++i)
#pragma unroll
                    for (int v = 0; v < VEC; ++v)
                        a_at(a_tile[target], a_row + i * a_row_step, a_p + v) = next_a[i].e[v];
            }
#if USE_ASYNC_B
            wait_async_copies();
#else
#pragma unroll
            for (int i = 0; i < B_VECS; ++i)
                *reinterpret_cast<uint4*>(&b_tile[target][b_p + i * b_row_step][b_col]) = next_b[i].raw;
#endif
        }
    };

    k_loop<TWO_STEPS>(acc, a_tile, b_tile, k, ty, tx, fetch, [&](int, int target) { stage(target); });
}

// C <- alpha*acc + beta*C over the part of this thread's micro-tile inside
// the m x n matrix; beta == 0 never reads C.
__device__ __forceinline__ void store_tile(const ACC (&acc)[TM][TN], int m, int n, ELEM alpha, ELEM beta,
                                           ELEM* __restrict__ c, long long ldc, const SimtPlace& place)
{
    for_each_inside(place.row0, place.col0, m, n, place.ty, place.tx, [&](int i, int j, int gi, int gj) {
        ACC result = (ACC)alpha * acc[i][j];
        if (beta != (ELEM)0) result += (ACC)beta * (ACC)c[gi * ldc + gj];
        c[gi * ldc + gj] = (ELEM)result;
    });
}
