// The register-only outer-product kernel of the DFMA probes
// (dfma_occupancy.cu, dfma_operands.cu): each thread runs `iters` trips of
// the f64 SIMT GEMM's inner update over TM x TN accumulators, with the
// sources that change from one DFMA to the next chosen by FRESH:
//   1: acc[i][j] = fma(a[i], b[0], acc[i][j])        a kept across j, b always
//   2: acc[i][j] = fma(a[i], b[j], acc[i][j])        the GEMM: a kept across j
//   3: acc[i][j] = fma(a[(i+j)%TM], b[j], acc[i][j])  neither kept
#pragma once
#include "probe_check.h"

template <int TM, int TN, int THREADS, int MINB, int FRESH = 2>
__global__ void __launch_bounds__(THREADS, MINB) outer_products(double* out, int iters, double seed)
{
    double a[TM], b[TN], acc[TM][TN];
    init_fragments(a, b, acc, seed);
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                if (FRESH == 1) acc[i][j] = fma(a[i], b[0], acc[i][j]);
                if (FRESH == 2) acc[i][j] = fma(a[i], b[j], acc[i][j]);
                if (FRESH == 3) acc[i][j] = fma(a[(i + j) % TM], b[j], acc[i][j]);
            }
        clobber(a);
        clobber(b);
    }
    store_sum(acc, out);
}
