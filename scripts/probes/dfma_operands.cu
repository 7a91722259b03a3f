// Why an f64 outer product cannot reach the DFMA peak (issue 6): the same
// register-only 8 x 8 update as the f64 SIMT GEMM's inner loop, with the
// number of source operands that change from one DFMA to the next varied:
//   fresh1: acc[i][j] = fma(a[i], x, acc[i][j])      a kept across j, x always
//   fresh2: acc[i][j] = fma(a[i], b[j], acc[i][j])   the GEMM: a kept across j
//   fresh3: acc[i][j] = fma(a[(i+j)%8], b[j], acc)  neither kept
// (acc is a different register in every DFMA, as in any GEMM). If the
// operand reads, not the DFMA pipe, set the rate, TFLOPS fall as operands
// turn fresh. 256 threads x 1 block per SM, as the 8 x 8 mbarrier kernel.
// Build and run: nvcc -O3 -arch=sm_90 dfma_operands.cu -o ops && ./ops
// (cuobjdump -sass ops | grep -c reuse shows the operand-reuse flags).
#include <cstdio>
#include <cuda_runtime.h>

#include "probe_check.h"

constexpr int TM = 8, TN = 8, THREADS = 256;

template <int FRESH>
__global__ void __launch_bounds__(THREADS, 1) products(double* out, int iters, double seed)
{
    double a[TM], b[TN], acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) a[i] = seed * (threadIdx.x + i);
#pragma unroll
    for (int j = 0; j < TN; ++j) b[j] = seed / (threadIdx.x + j + 1);
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                if (FRESH == 1) acc[i][j] = fma(a[i], b[0], acc[i][j]);
                if (FRESH == 2) acc[i][j] = fma(a[i], b[j], acc[i][j]);
                if (FRESH == 3) acc[i][j] = fma(a[(i + j) % TM], b[j], acc[i][j]);
            }
        // The compiler must assume a and b change, as a GEMM's fragments do.
#pragma unroll
        for (int i = 0; i < TM; ++i) asm volatile("" : "+d"(a[i]));
#pragma unroll
        for (int j = 0; j < TN; ++j) asm volatile("" : "+d"(b[j]));
    }
    double sum = 0;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) sum += acc[i][j];
    out[blockIdx.x * THREADS + threadIdx.x] = sum;
}

template <int FRESH>
void measure(int sms)
{
    const int blocks = sms, iters = 1 << 14;
    double* out;
    CUDA_CHECK(cudaMalloc(&out, sizeof(double) * THREADS * blocks));
    auto launch = [&] {
        products<FRESH><<<blocks, THREADS>>>(out, iters, 1e-3);
        CUDA_CHECK(cudaGetLastError());
    };
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    const float ms = median_event_ms(launch, 7);
    const double flops = 2.0 * TM * TN * (double)iters * THREADS * blocks;
    printf("fresh%d: %.3f ms, %.2f TFLOPS\n", FRESH, ms, flops / (ms * 1e-3) / 1e12);
    CUDA_CHECK(cudaFree(out));
}

int main()
{
    int sms;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int round = 0; round < 2; ++round) {
        measure<1>(sms);
        measure<2>(sms);
        measure<3>(sms);
    }
    return 0;
}
