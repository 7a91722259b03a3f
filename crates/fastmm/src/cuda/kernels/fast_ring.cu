// C <- alpha*A*B + beta*C as fast.cu computes it (simt_tile.cuh, prepended,
// has the tile geometry and the inner loops), for operands whose rows are
// not 16-byte aligned, where fast.cu falls back to synchronous guarded
// scalar loads in every step. The host picks this kernel when vec_ok would
// be false (cuda::gemm::launch_pass).
//
// Staging: a ring of STAGES shared-memory buffers (A's tile transposed and
// padded, B's as it lies), filled with cp.async (sm_80+) STAGES - 1 k steps
// ahead of the products, so each step's global latency is hidden behind
// STAGES - 1 steps of arithmetic and no operand passes through registers.
// A's elements are copied one by one into their transposed places (a warp
// copies 4 rows x 8 k: whole 32-byte sectors from global memory, and with
// rows A_LD = BM + VEC elements apart, stores to 32 distinct banks), so A
// needs no alignment beyond its element's; B's in 16-byte vectors when the
// block's columns lie inside the matrix and vec_ok says B's rows are
// 16-byte aligned, else one by one. Copies outside the matrices are
// zero-filled, so any m, n, k works. One barrier per k step.
//
// On aligned operands this kernel measured 3% slower than fast.cu for f32
// (4096^3-16384^3 on the H100, with 3 or 4 stages alike) and level for f64;
// on 4099^3 f32 17% faster.
//
// Split-K, the wave tail and the grouped tile order as in fast.cu.
//
// RING_MBARRIERS (sm_90+; the host's f64 8 x 8 configuration, which takes
// any operands, aligned or not): no block barrier per k step. Each buffer
// has a "full" mbarrier, whose phase completes when every thread's copies
// into it have landed, and an "empty" one, whose phase completes when
// every thread has read it; a thread refills the buffer it read one step
// earlier once that is empty, so warps may drift up to a step apart
// instead of all waiting for the slowest at every step. With one block of
// 8 warps per SM (254 registers, 128 of them accumulators) the barrier per
// step cost 4.5% at 8192^3 in the probes, and this kernel runs 13-20%
// faster than the 8 x 4 two-block one on the H100.
//
// Built by NVRTC with -DELEM, -DACC (unsigned for integers, so overflow
// wraps), -DTM, -DTN, -DSTAGES and optionally -DBK and -DRING_MBARRIERS=1;
// dynamic shared memory STAGES x STAGE_ELEMS elements, which the host
// mirrors (cuda::gemm::ring_shared_bytes). beta == 0 never reads C.
#define MIN_BLOCKS (TM * TN * (int)sizeof(ACC) > 256 ? 1 : 2)
#ifndef STAGES
#error "STAGES must be defined by the host"
#endif
static_assert(STAGES >= 2, "the ring needs a buffer being filled and one being read");
#ifndef RING_MBARRIERS
#define RING_MBARRIERS 0
#endif
#if RING_MBARRIERS && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 900)
#error "RING_MBARRIERS needs sm_90 (mbarrier.try_wait)"
#endif
// A's transposed tile: BK rows of A_LD elements.
#define A_LD (BM + VEC)
#define STAGE_ELEMS (BK * (A_LD + BN))
// A's elements per thread per step, copied as chunks of 4 rows x 8 k by
// each warp (BK / 8 chunks side by side along k).
#define A_ELEMS (BM * BK / THREADS)
#define A_CHUNKS_ALONG_K (BK / 8)
static_assert(BK % 8 == 0 && BM % 32 == 0 && A_ELEMS * THREADS == BM * BK && A_ELEMS % A_CHUNKS_ALONG_K == 0,
              "A's chunks must tile A's block");

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_fast_ring(int m, int n, int k, ELEM alpha, const ELEM* __restrict__ a, long long lda,
          const ELEM* __restrict__ b, long long ldb, ELEM beta, ELEM* __restrict__ c,
          long long ldc, int vec_ok, int k_slice, long long c_slice, int tile_limit)
{
    SKIP_TILES_FROM(tile_limit);
    ENTER_K_SLICE();
    extern __shared__ __align__(16) unsigned char shared[];
    ELEM* const ring = reinterpret_cast<ELEM*>(shared);
    const SimtPlace place = simt_place();
    const int tid = place.tid, row0 = place.row0, col0 = place.col0, ty = place.ty, tx = place.tx;
    const int lane = tid % 32, warp = tid / 32;
    // This thread's A elements: chunk warp·A_ELEMS + i covers rows
    // 4·(chunk / A_CHUNKS_ALONG_K) + (0..3) and k 8·(chunk % A_CHUNKS_ALONG_K)
    // + (0..7); the thread takes row lane / 8 and k lane % 8 of each.
    const int a_row = 4 * (warp * A_ELEMS / A_CHUNKS_ALONG_K) + lane / 8, a_p = lane % 8;
    // Its first B vector; vector i lies i·b_row_step rows further down.
    const int b_p = tid / B_VECS_PER_ROW, b_col = (tid % B_VECS_PER_ROW) * VEC;
    const int b_row_step = THREADS / B_VECS_PER_ROW;
    const bool a_rows_inside = row0 + BM <= m;
    const bool b_vectors = vec_ok && col0 + BN <= n;
    // Interior steps walk from these (used only when the block's rows of A,
    // or its columns of B, lie inside the matrix).
    const ELEM* const a_base = a + (long long)(row0 + a_row) * lda + a_p;
    const ELEM* const b_base = b + (long long)b_p * ldb + col0 + b_col;
    const long long a_group_step = 4 * lda, b_group_step = b_row_step * ldb;

#if RING_MBARRIERS
    __shared__ unsigned long long full[STAGES], empty[STAGES];
    if (tid < STAGES) {
        mbarrier_init(&full[tid], THREADS);
        mbarrier_init(&empty[tid], THREADS);
    }
    mbarrier_init_fence();
    __syncthreads();
#endif

    ACC acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0;

    // Starts copying k step `step` into ring buffer `slot` and commits the
    // copies as one group (an empty one past k, so that group counts stay
    // in step with k steps).
    auto issue = [&](int step, int slot) {
        const int p0 = step * BK;
        if (p0 < k) {
            ELEM* const a_stage = ring + slot * STAGE_ELEMS;
            ELEM* const b_stage = a_stage + BK * A_LD;
            const bool k_inside = p0 + BK <= k;
            if (a_rows_inside && k_inside) {
                // One pointer walks the thread's chunks (one 64-bit add per
                // 4-row step): no per-element 64-bit offsets in registers.
                const ELEM* src = a_base + p0;
#pragma unroll
                for (int i = 0; i < A_ELEMS; ++i) {
                    const int p = a_p + 8 * (i % A_CHUNKS_ALONG_K), row = a_row + 4 * (i / A_CHUNKS_ALONG_K);
                    copy_async_element(&a_stage[p * A_LD + row], src + 8 * (i % A_CHUNKS_ALONG_K), true);
                    if (i % A_CHUNKS_ALONG_K == A_CHUNKS_ALONG_K - 1) src += a_group_step;
                }
            } else {
#pragma unroll
                for (int i = 0; i < A_ELEMS; ++i) {
                    const int p = a_p + 8 * (i % A_CHUNKS_ALONG_K), row = a_row + 4 * (i / A_CHUNKS_ALONG_K);
                    const bool inside = row0 + row < m && p0 + p < k;
                    copy_async_element(&a_stage[p * A_LD + row],
                                       inside ? a + (long long)(row0 + row) * lda + p0 + p : a, inside);
                }
            }
            if (b_vectors && k_inside) {
                const ELEM* src = b_base + (long long)p0 * ldb;
#pragma unroll
                for (int i = 0; i < B_VECS; ++i) {
                    copy_async16(&b_stage[(b_p + i * b_row_step) * BN + b_col], src);
                    src += b_group_step;
                }
            } else {
#pragma unroll
                for (int i = 0; i < B_VECS; ++i)
#pragma unroll
                    for (int v = 0; v < VEC; ++v) {
                        const int p = b_p + i * b_row_step, col = col0 + b_col + v;
                        const bool inside = p0 + p < k && col < n;
                        copy_async_element(&b_stage[p * BN + b_col + v],
                                           inside ? b + (long long)(p0 + p) * ldb + col : b, inside);
                    }
            }
        }
#if RING_MBARRIERS
        // Called only for steps inside k: a full barrier counts one arrival
        // per thread per step.
        mbarrier_arrive_after_copies(&full[slot]);
#else
        commit_async_copies();
#endif
    };

    const int steps = (k + BK - 1) / BK;
#if RING_MBARRIERS
    for (int s = 0; s < STAGES - 1 && s < steps; ++s) issue(s, s);
    int slot = 0;
    unsigned parity = 0;
    for (int step = 0; step < steps; ++step) {
        mbarrier_wait(&full[slot], parity);
        const ELEM* const a_stage = ring + slot * STAGE_ELEMS;
        step_products<A_LD>(acc, reinterpret_cast<const ELEM(*)[A_LD]>(a_stage),
                            reinterpret_cast<const ELEM(*)[BN]>(a_stage + BK * A_LD), ty, tx);
        mbarrier_arrive(&empty[slot]);
        if (step + STAGES - 1 < steps) {
            // The buffer of step - 1 (at step 0 the last one, not used yet),
            // once every thread has read it.
            const int target = slot == 0 ? STAGES - 1 : slot - 1;
            if (step > 0) mbarrier_wait(&empty[target], slot == 0 ? parity ^ 1 : parity);
            issue(step + STAGES - 1, target);
        }
        if (++slot == STAGES) {
            slot = 0;
            parity ^= 1;
        }
    }
#else
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s, s);
    int slot = 0;
    for (int step = 0; step < steps; ++step) {
        // Step `step`'s group is complete for this thread, and after the
        // barrier for every thread; every thread has also finished the
        // products of step - 1, whose buffer the next issue refills.
        wait_async_groups<STAGES - 2>();
        __syncthreads();
        issue(step + STAGES - 1, slot == 0 ? STAGES - 1 : slot - 1);
        const ELEM* const a_stage = ring + slot * STAGE_ELEMS;
        step_products<A_LD>(acc, reinterpret_cast<const ELEM(*)[A_LD]>(a_stage),
                            reinterpret_cast<const ELEM(*)[BN]>(a_stage + BK * A_LD), ty, tx);
        slot = slot == STAGES - 1 ? 0 : slot + 1;
    }
#endif
    for_each_inside(row0, col0, m, n, ty, tx, [&](int i, int j, int gi, int gj) {
        ACC result = (ACC)alpha * acc[i][j];
        if (beta != (ELEM)0) result += (ACC)beta * (ACC)c[gi * ldc + gj];
        c[gi * ldc + gj] = (ELEM)result;
    });
}
