// Can a SIMT f64 GEMM lift the 28.7 TFLOPS ceiling of dfma_operands.cu's
// fresh2 pattern by taking B's fragment from the uniform datapath (a
// warp-uniform register or the constant bank, not the vector register
// file)? Each variant is the 8 x 8 register update acc[i][j] += a[i]*b[j]
// with a and acc per lane; b's values are the same in every lane:
//   lanes: b read from shared memory at a warp-uniform address each step
//   const: b read from __constant__ memory at a warp-uniform index
//   shfl:  b read from shared memory and broadcast from lane 0
// The SASS (cuobjdump -sass) shows whether the DFMAs name UR or c[] operands.
// Build and run: nvcc -O3 -arch=sm_90 dfma_uniform.cu -o uni && ./uni
#include <cstdio>
#include <cuda_runtime.h>

#include "probe_check.h"

constexpr int TM = 8, TN = 8, THREADS = 256, STEPS = 16;

__constant__ double b_const[STEPS * TN];

template <int SOURCE>
__global__ void __launch_bounds__(THREADS, 1) products(double* out, int iters, double seed)
{
    __shared__ double b_shared[STEPS * TN];
    if (threadIdx.x < STEPS * TN) b_shared[threadIdx.x] = seed * (threadIdx.x + 1);
    __syncthreads();
    double a[TM], acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) a[i] = seed * (threadIdx.x + i);
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            double b[TN];
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                if (SOURCE == 0) b[j] = b_shared[s * TN + j];
                if (SOURCE == 1) b[j] = b_const[s * TN + j];
                // Lane 0's value broadcast: uniform, if the compiler sees it.
                if (SOURCE == 2) b[j] = __shfl_sync(0xffffffffu, b_shared[s * TN + j], 0);
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
#pragma unroll
            for (int i = 0; i < TM; ++i) asm volatile("" : "+d"(a[i]));
            // Reload b every step, as a GEMM reads a new k row each time.
            asm volatile("" ::: "memory");
        }
    }
    double sum = 0;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) sum += acc[i][j];
    out[blockIdx.x * THREADS + threadIdx.x] = sum;
}

template <int SOURCE>
void measure(const char* name, int sms)
{
    const int blocks = sms, iters = 1 << 10;
    double* out;
    CUDA_CHECK(cudaMalloc(&out, sizeof(double) * THREADS * blocks));
    auto launch = [&] {
        products<SOURCE><<<blocks, THREADS>>>(out, iters, 1e-3);
        CUDA_CHECK(cudaGetLastError());
    };
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    const float ms = median_event_ms(launch, 7);
    const double flops = 2.0 * TM * TN * STEPS * (double)iters * THREADS * blocks;
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
        measure<0>("b from shared, uniform address", sms);
        measure<1>("b from constant memory", sms);
        measure<2>("b from shared, broadcast by shfl", sms);
    }
    return 0;
}
