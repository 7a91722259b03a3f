// C <- alpha*A*B + beta*C with square shared-memory tiles (seed 000 §5.3,
// seed 002 §10.3.4): each TILE x TILE block stages a tile of A and a tile of
// B in shared memory per step of k, and each thread computes one element of
// C. Edges are zero-filled, so any m, k, n works. Built by NVRTC with
// -DELEM, -DACC (unsigned for integers, so overflow wraps) and -DTILE.
// beta == 0 never reads C.
extern "C" __global__ void __launch_bounds__(TILE * TILE)
gemm_tiled(int m, int n, int k, ELEM alpha, const ELEM* __restrict__ a, long long lda,
           const ELEM* __restrict__ b, long long ldb, ELEM beta, ELEM* __restrict__ c,
           long long ldc)
{
    __shared__ ELEM a_tile[TILE][TILE];
    __shared__ ELEM b_tile[TILE][TILE];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int col = blockIdx.x * TILE + tx;
    const int row = blockIdx.y * TILE + ty;
    ACC sum = 0;
    for (int p0 = 0; p0 < k; p0 += TILE) {
        a_tile[ty][tx] = (row < m && p0 + tx < k) ? a[row * lda + p0 + tx] : (ELEM)0;
        b_tile[ty][tx] = (p0 + ty < k && col < n) ? b[(p0 + ty) * ldb + col] : (ELEM)0;
        __syncthreads();
#pragma unroll
        for (int q = 0; q < TILE; ++q) {
            sum += (ACC)a_tile[ty][q] * (ACC)b_tile[q][tx];
        }
        __syncthreads();
    }
    if (row >= m || col >= n) return;
    ACC result = (ACC)alpha * sum;
    if (beta != (ELEM)0) result += (ACC)beta * (ACC)c[row * ldc + col];
    c[row * ldc + col] = (ELEM)result;
}
