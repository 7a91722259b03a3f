// dst <- keep*dst + sum_{t < count} w_t * src_t over a rows x cols block:
// the linear combinations of Strassen's and Winograd's schedules. Row-major
// blocks with leading dimensions in elements; up to four terms per launch
// (the host splits longer sums). keep == 0 never reads dst. Built by NVRTC
// with -DELEM, -DACC (unsigned for integers, so overflow wraps) and
// -DROWS_PER_BLOCK; a block is 32 x ROWS_PER_BLOCK threads.
extern "C" __global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
combine(int rows, int cols, ELEM keep, ELEM* __restrict__ dst, long long ldd, int count,
        const ELEM* __restrict__ s0, long long l0, ELEM w0,
        const ELEM* __restrict__ s1, long long l1, ELEM w1,
        const ELEM* __restrict__ s2, long long l2, ELEM w2,
        const ELEM* __restrict__ s3, long long l3, ELEM w3)
{
    const int j = blockIdx.x * 32 + threadIdx.x;
    const int i = blockIdx.y * ROWS_PER_BLOCK + threadIdx.y;
    if (i >= rows || j >= cols) return;
    ACC v = (keep == (ELEM)0) ? (ACC)0 : (ACC)keep * (ACC)dst[i * ldd + j];
    if (count > 0) v += (ACC)w0 * (ACC)s0[i * l0 + j];
    if (count > 1) v += (ACC)w1 * (ACC)s1[i * l1 + j];
    if (count > 2) v += (ACC)w2 * (ACC)s2[i * l2 + j];
    if (count > 3) v += (ACC)w3 * (ACC)s3[i * l3 + j];
    dst[i * ldd + j] = (ELEM)v;
}
