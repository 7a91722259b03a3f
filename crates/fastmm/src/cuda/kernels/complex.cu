// Complex matrices stored interleaved (each element a (real, imaginary)
// pair of ELEM, as numpy, torch and cuBLAS store them) to and from the
// split real planes that fastmm's real products multiply. Only additions
// and copies, each rounded once to ELEM, as the CPU twin
// (fastmm::complex) forms them.
//
//   cx_split    rows x cols complex elements (row i at src + 2*i*lds) into
//               the planes re and im (ld ldd), and re + im into `sum` when
//               it is not null (Gauss's 3M form)
//   cx_combine  C (row i at c + 2*i*ldc) from the planes re and im (ld
//               ldp): as they are (the classical form, whose real products
//               were summed in place), or with Gauss's P2 given, from P1 in
//               re and P3 in im: (P1 - P2, (P3 - P1) - P2)
//
// Block 256; grid (ceil(cols / 256), min(rows, 65535)), rows strided by
// the grid's y extent. COMPLEX_TILE is passed for uniformity and unused.

extern "C" __global__ void cx_split(int rows, int cols, const ELEM* __restrict__ src,
                                    long long lds, ELEM* __restrict__ re,
                                    ELEM* __restrict__ im, ELEM* __restrict__ sum,
                                    long long ldd)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    for (int i = blockIdx.y; i < rows; i += gridDim.y) {
        const ELEM* pair = src + 2 * ((long long)i * lds + j);
        const ELEM x = pair[0], y = pair[1];
        const long long at = (long long)i * ldd + j;
        re[at] = x;
        im[at] = y;
        if (sum != 0) sum[at] = x + y;
    }
}

extern "C" __global__ void cx_combine(int rows, int cols, const ELEM* __restrict__ re,
                                      const ELEM* __restrict__ im,
                                      const ELEM* __restrict__ p2, long long ldp,
                                      ELEM* __restrict__ c, long long ldc)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    for (int i = blockIdx.y; i < rows; i += gridDim.y) {
        const long long at = (long long)i * ldp + j;
        const ELEM r = re[at], m = im[at];
        ELEM* out = c + 2 * ((long long)i * ldc + j);
        if (p2 == 0) {
            out[0] = r;
            out[1] = m;
        } else {
            const ELEM q = p2[at];
            out[0] = r - q;
            out[1] = (m - r) - q;
        }
    }
}
