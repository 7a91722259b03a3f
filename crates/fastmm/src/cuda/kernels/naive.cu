// C <- alpha*A*B + beta*C, one thread per element of C, operands read from
// global memory only (the seeds' first GPU kernel). Row-major with leading
// dimensions in elements. Built by NVRTC with -DELEM=<element type>,
// -DACC=<accumulator type> (unsigned for integers, so overflow wraps) and
// -DBLOCK=<edge of the square thread block>. beta == 0 never reads C.
extern "C" __global__ void __launch_bounds__(BLOCK * BLOCK)
gemm_naive(int m, int n, int k, ELEM alpha, const ELEM* __restrict__ a, long long lda,
           const ELEM* __restrict__ b, long long ldb, ELEM beta, ELEM* __restrict__ c,
           long long ldc)
{
    const int col = blockIdx.x * BLOCK + threadIdx.x;
    const int row = blockIdx.y * BLOCK + threadIdx.y;
    if (row >= m || col >= n) return;
    ACC sum = 0;
    for (int p = 0; p < k; ++p) {
        sum += (ACC)a[row * lda + p] * (ACC)b[p * ldb + col];
    }
    ACC result = (ACC)alpha * sum;
    if (beta != (ELEM)0) result += (ACC)beta * (ACC)c[row * ldc + col];
    c[row * ldc + col] = (ELEM)result;
}
