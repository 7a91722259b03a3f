// C <- alpha*A*B + beta*C, register-blocked: a block computes a BM x BN tile
// of C with 256 threads, each a TM x TM micro-tile held in registers, over
// k steps of BK staged in shared memory (A transposed, so both operands are
// read along rows). A thread's rows (and columns) come in groups of four,
// the groups BM/G apart, so a warp's shared loads of four consecutive
// elements fall in distinct banks.
//
// Global loads: every thread fetches one 16-byte vector of A and one of B
// per k step when the block's tiles lie inside the matrices and the host
// said the rows are 16-byte aligned (vec_ok); otherwise guarded scalar
// loads zero-fill the edges, so any m, n, k works. The next step's vectors
// are fetched into registers before the current step's products, and the
// shared tiles are double-buffered, so one barrier per step suffices.
//
// With split-K (gridDim.z > 1) each z slice covers k_slice columns of A and
// writes its own slice of C, c_slice elements apart; k_slice is a multiple
// of BK, so the slices' rows stay 16-byte aligned.
//
// Built by NVRTC with -DELEM, -DACC (unsigned for integers, so overflow
// wraps) and -DTM (8 for 4-byte types: BM = BN = 128; 4 for 8-byte types:
// BM = BN = 64). beta == 0 never reads C.
#define BM (16 * TM)
#define BK 8
#define THREADS 256
#define GROUPS (TM / 4)
#define GROUP_STRIDE (BM / GROUPS)
#define VEC (16 / (int)sizeof(ELEM))
// One vector of A per thread: rows tid / A_VECS_PER_ROW, k offset below.
#define A_VECS_PER_ROW (BK / VEC)
#define B_VECS_PER_ROW (BM / VEC)

union Vec16 {
    uint4 raw;
    ELEM e[VEC];
};

// Two blocks per SM: at most 128 registers per thread.
extern "C" __global__ void __launch_bounds__(THREADS, 2)
gemm_fast(int m, int n, int k, ELEM alpha, const ELEM* __restrict__ a, long long lda,
          const ELEM* __restrict__ b, long long ldb, ELEM beta, ELEM* __restrict__ c,
          long long ldc, int vec_ok, int k_slice, long long c_slice)
{
    // Split-K: block z multiplies k columns [z·k_slice, …) of A by the same
    // rows of B into its own m×n slice of C (the host adds the slices).
    {
        const int k0 = blockIdx.z * k_slice;
        a += k0;
        b += (long long)k0 * ldb;
        c += blockIdx.z * c_slice;
        k = min(k_slice, k - k0);
    }
    __shared__ __align__(16) ELEM a_tile[2][BK][BM];
    __shared__ __align__(16) ELEM b_tile[2][BK][BM];
    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BM;
    const int ty = tid / 16;
    const int tx = tid % 16;
    // This thread's vector of each tile.
    const int a_row = tid / A_VECS_PER_ROW, a_p = (tid % A_VECS_PER_ROW) * VEC;
    const int b_p = tid / B_VECS_PER_ROW, b_col = (tid % B_VECS_PER_ROW) * VEC;
    const bool rows_inside = vec_ok && row0 + BM <= m && col0 + BM <= n;

    ACC acc[TM][TM];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TM; ++j) acc[i][j] = 0;

    Vec16 next_a, next_b;
    // This thread's vectors at step 0; the interior path walks them along k.
    const ELEM* a_walk = a + (long long)(row0 + a_row) * lda + a_p;
    const ELEM* b_walk = b + (long long)b_p * ldb + col0 + b_col;
    const long long b_step = BK * ldb;
    // Fetches step p0's vectors into next_a / next_b (zero outside).
    auto fetch = [&](int p0) {
        if (rows_inside && p0 + BK <= k) {
            next_a.raw = *reinterpret_cast<const uint4*>(a_walk + p0);
            next_b.raw = *reinterpret_cast<const uint4*>(b_walk + (p0 / BK) * b_step);
        } else {
#pragma unroll
            for (int v = 0; v < VEC; ++v) {
                const int gi = row0 + a_row, gp = p0 + a_p + v;
                next_a.e[v] = (gi < m && gp < k) ? a[gi * lda + gp] : (ELEM)0;
                const int hp = p0 + b_p, gj = col0 + b_col + v;
                next_b.e[v] = (hp < k && gj < n) ? b[hp * ldb + gj] : (ELEM)0;
            }
        }
    };
    auto stage = [&](int buf) {
#pragma unroll
        for (int v = 0; v < VEC; ++v) a_tile[buf][a_p + v][a_row] = next_a.e[v];
        *reinterpret_cast<uint4*>(&b_tile[buf][b_p][b_col]) = next_b.raw;
    };

    fetch(0);
    stage(0);
    __syncthreads();
    int buf = 0;
    for (int p0 = 0; p0 < k; p0 += BK) {
        const bool more = p0 + BK < k;
        if (more) fetch(p0 + BK);
        ELEM ra[TM];
        ELEM rb[TM];
#pragma unroll
        for (int p = 0; p < BK; ++p) {
#pragma unroll
            for (int g = 0; g < GROUPS; ++g)
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    ra[g * 4 + r] = a_tile[buf][p][g * GROUP_STRIDE + ty * 4 + r];
                    rb[g * 4 + r] = b_tile[buf][p][g * GROUP_STRIDE + tx * 4 + r];
                }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TM; ++j) acc[i][j] += (ACC)ra[i] * (ACC)rb[j];
        }
        if (more) {
            // The other buffer was last read before the previous barrier.
            stage(buf ^ 1);
            __syncthreads();
            buf ^= 1;
        }
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int gi = row0 + (i / 4) * GROUP_STRIDE + ty * 4 + i % 4;
        if (gi >= m) continue;
#pragma unroll
        for (int j = 0; j < TM; ++j) {
            const int gj = col0 + (j / 4) * GROUP_STRIDE + tx * 4 + j % 4;
            if (gj >= n) continue;
            ACC result = (ACC)alpha * acc[i][j];
            if (beta != (ELEM)0) result += (ACC)beta * (ACC)c[gi * ldc + gj];
            c[gi * ldc + gj] = (ELEM)result;
        }
    }
}
