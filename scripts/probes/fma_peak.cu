// Register-only FMA throughput of one GPU, for the FP64 (DFMA) and FP32
// (FFMA) pipes: the practical ceiling a SIMT GEMM is measured against.
// Every thread runs CHAINS independent FMA chains, so latency is covered.
// Build and run: nvcc -O3 -arch=sm_90 fma_peak.cu -o fma_peak && ./fma_peak
#include <cstdio>
#include <cuda_runtime.h>

#include "probe_check.h"

constexpr int CHAINS = 16;

template <typename T>
__global__ void fma_loop(T* out, int iters, T x, T y)
{
    T acc[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) acc[c] = (T)(threadIdx.x + c);
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) acc[c] = fma(acc[c], x, y);
    }
    T sum = 0;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) sum += acc[c];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

template <typename T>
int measure(const char* name, int sms)
{
    const int threads = 256, blocks = sms * 8, iters = 1 << 16;
    T* out;
    CUDA_CHECK(cudaMalloc(&out, sizeof(T) * threads * blocks));
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    fma_loop<T><<<blocks, threads>>>(out, iters, (T)0.999999, (T)1e-7);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    float best = 1e30f;
    for (int rep = 0; rep < 5; ++rep) {
        CUDA_CHECK(cudaEventRecord(start));
        fma_loop<T><<<blocks, threads>>>(out, iters, (T)0.999999, (T)1e-7);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaEventRecord(stop));
        CUDA_CHECK(cudaEventSynchronize(stop));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        printf("%s rep %d: %.3f ms, %.2f TFLOPS\n", name, rep, ms,
               2.0 * CHAINS * iters * (double)threads * blocks / (ms * 1e-3) / 1e12);
        if (ms < best) best = ms;
    }
    printf("%s best: %.2f TFLOPS\n", name, 2.0 * CHAINS * iters * (double)threads * blocks / (best * 1e-3) / 1e12);
    CUDA_CHECK(cudaFree(out));
    return 0;
}

int main()
{
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    printf("%s, %d SMs, max clock %.0f MHz\n", prop.name, prop.multiProcessorCount, clock_khz / 1e3);
    if (measure<double>("DFMA", prop.multiProcessorCount)) return 1;
    if (measure<float>("FFMA", prop.multiProcessorCount)) return 1;
    return 0;
}
