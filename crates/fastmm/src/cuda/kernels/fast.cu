// C <- alpha*A*B + beta*C, register-blocked: a block computes a BM x BN tile
// of C with 256 threads, each a TM x TM micro-tile held in registers, over
// k steps of BK staged in shared memory (A transposed, so both operands are
// read along rows). A thread's rows (and columns) come in groups of four,
// the groups BM/G apart, so a warp's shared loads of four consecutive
// elements fall in distinct banks. Edges are zero-filled on load and
// guarded on store: any m, n, k. Built by NVRTC with -DELEM, -DACC
// (unsigned for integers, so overflow wraps) and -DTM (8 for 4-byte types:
// BM = BN = 128; 4 for 8-byte types: BM = BN = 64). beta == 0 never reads C.
#define BM (16 * TM)
#define BK 8
#define THREADS 256
#define GROUPS (TM / 4)
#define GROUP_STRIDE (BM / GROUPS)

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_fast(int m, int n, int k, ELEM alpha, const ELEM* __restrict__ a, long long lda,
          const ELEM* __restrict__ b, long long ldb, ELEM beta, ELEM* __restrict__ c,
          long long ldc)
{
    __shared__ __align__(16) ELEM a_tile[BK][BM];
    __shared__ __align__(16) ELEM b_tile[BK][BM];
    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BM;
    const int ty = tid / 16;
    const int tx = tid % 16;
    ACC acc[TM][TM];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TM; ++j) acc[i][j] = 0;
    ELEM ra[TM];
    ELEM rb[TM];
    for (int p0 = 0; p0 < k; p0 += BK) {
        // A: BM x BK, consecutive threads along k (contiguous in memory).
#pragma unroll
        for (int e = tid; e < BM * BK; e += THREADS) {
            const int i = e / BK, p = e % BK;
            const int gi = row0 + i, gp = p0 + p;
            a_tile[p][i] = (gi < m && gp < k) ? a[gi * lda + gp] : (ELEM)0;
        }
        // B: BK x BN, consecutive threads along n.
#pragma unroll
        for (int e = tid; e < BM * BK; e += THREADS) {
            const int p = e / BM, j = e % BM;
            const int gp = p0 + p, gj = col0 + j;
            b_tile[p][j] = (gp < k && gj < n) ? b[gp * ldb + gj] : (ELEM)0;
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < BK; ++p) {
#pragma unroll
            for (int g = 0; g < GROUPS; ++g)
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    ra[g * 4 + r] = a_tile[p][g * GROUP_STRIDE + ty * 4 + r];
                    rb[g * 4 + r] = b_tile[p][g * GROUP_STRIDE + tx * 4 + r];
                }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TM; ++j) acc[i][j] += (ACC)ra[i] * (ACC)rb[j];
        }
        __syncthreads();
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
