// Why an f64 outer product cannot reach the DFMA peak (issue 6): the f64
// SIMT GEMM's inner update acc[i][j] += a[i]*b[j] (8 x 8 accumulators per
// thread, 256 threads x 1 block per SM, as the 8 x 8 mbarrier kernel),
// register-only, with the sources that change from one DFMA to the next,
// and where b comes from, varied:
//   fresh1: acc[i][j] = fma(a[i], x, acc[i][j])      a kept across j, x always
//   fresh2: acc[i][j] = fma(a[i], b[j], acc[i][j])   the GEMM: a kept across j
//   fresh3: acc[i][j] = fma(a[(i+j)%8], b[j], acc)  neither kept
//   b from shared memory at a warp-uniform address, each k step
//   b from __constant__ memory at a warp-uniform index (the uniform datapath)
//   b from shared memory broadcast from lane 0 by __shfl_sync
// (acc is a different register in every DFMA, as in any GEMM). If the
// operand reads, not the DFMA pipe, set the rate, TFLOPS fall as sources
// turn fresh, and rise where b leaves the vector register file.
// Build and run: nvcc -O3 -arch=sm_90 dfma_operands.cu -o ops && ./ops
// (cuobjdump -sass ops shows the reuse flags and UR operands of the DFMAs).
#include <cstdio>
#include <cuda_runtime.h>

#include "dfma_kernels.cuh"

constexpr int TM = 8, TN = 8, THREADS = 256, STEPS = 16;

__constant__ double b_const[STEPS * TN];

enum Source { SHARED = 0, CONSTANT = 1, SHUFFLED = 2 };

template <int SOURCE>
__global__ void __launch_bounds__(THREADS, 1) uniform_b(double* out, int iters, double seed)
{
    __shared__ double b_shared[STEPS * TN];
    if (threadIdx.x < STEPS * TN) b_shared[threadIdx.x] = seed * (threadIdx.x + 1);
    __syncthreads();
    double a[TM], unused[TN], acc[TM][TN];
    init_fragments(a, unused, acc, seed);
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            double b[TN];
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                if (SOURCE == SHARED) b[j] = b_shared[s * TN + j];
                if (SOURCE == CONSTANT) b[j] = b_const[s * TN + j];
                if (SOURCE == SHUFFLED) b[j] = __shfl_sync(0xffffffffu, b_shared[s * TN + j], 0);
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
            clobber(a);
            // Reload b every step, as a GEMM reads a new k row each time.
            asm volatile("" ::: "memory");
        }
    }
    store_sum(acc, out);
}

// Median TFLOPS of 7 launches of `kernel` with `iters` trips of
// `dfmas_per_trip` DFMAs per thread, one block per SM.
template <typename Kernel>
void measure(const char* name, Kernel kernel, int iters, double dfmas_per_trip, int sms)
{
    double* out;
    CUDA_CHECK(cudaMalloc(&out, sizeof(double) * THREADS * sms));
    auto launch = [&] {
        kernel<<<sms, THREADS>>>(out, iters, 1e-3);
        CUDA_CHECK(cudaGetLastError());
    };
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    const float ms = median_event_ms(launch, 7);
    const double flops = 2.0 * dfmas_per_trip * iters * THREADS * sms;
    printf("%s: %.3f ms, %.2f TFLOPS\n", name, ms, flops / (ms * 1e-3) / 1e12);
    CUDA_CHECK(cudaFree(out));
}

int main()
{
    double host[STEPS * TN];
    for (int i = 0; i < STEPS * TN; ++i) host[i] = 1e-3 * (i + 1);
    CUDA_CHECK(cudaMemcpyToSymbol(b_const, host, sizeof(host)));
    int sms;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int round = 0; round < 2; ++round) {
        measure("fresh1", outer_products<TM, TN, THREADS, 1, 1>, 1 << 14, TM * TN, sms);
        measure("fresh2", outer_products<TM, TN, THREADS, 1, 2>, 1 << 14, TM * TN, sms);
        measure("fresh3", outer_products<TM, TN, THREADS, 1, 3>, 1 << 14, TM * TN, sms);
        measure("b from shared, uniform address", uniform_b<SHARED>, 1 << 10, TM * TN * STEPS, sms);
        measure("b from constant memory", uniform_b<CONSTANT>, 1 << 10, TM * TN * STEPS, sms);
        measure("b from shared, broadcast by shfl", uniform_b<SHUFFLED>, 1 << 10, TM * TN * STEPS, sms);
    }
    return 0;
}
