// Error checks shared by the standalone CUDA probes: every CUDA runtime and
// cuBLAS / cuBLASLt call goes through one of these, which prints where it
// failed and exits.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                                      \
    do {                                                                                      \
        cudaError_t err_ = (call);                                                            \
        if (err_ != cudaSuccess) {                                                            \
            fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));      \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)
#define CUBLAS_CHECK(call)                                                                    \
    do {                                                                                      \
        cublasStatus_t st_ = (call);                                                          \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                   \
            fprintf(stderr, "%s:%d cublas status %d\n", __FILE__, __LINE__, (int)st_);       \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

// Median of `reps` timings of launch() between two CUDA events on the
// default stream, in milliseconds (the caller warms up first).
template <typename Launch>
float median_event_ms(Launch&& launch, int reps)
{
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> times;
    for (int r = 0; r < reps; ++r) {
        CUDA_CHECK(cudaEventRecord(start));
        launch();
        CUDA_CHECK(cudaEventRecord(stop));
        CUDA_CHECK(cudaEventSynchronize(stop));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        times.push_back(ms);
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// The register-only DFMA probes' per-lane fragments: a[i] = seed·(tid + i),
// b[j] = seed / (tid + j + 1) and acc = 0, values the compiler cannot fold.
template <int TM, int TN>
__device__ __forceinline__ void init_fragments(double (&a)[TM], double (&b)[TN], double (&acc)[TM][TN], double seed)
{
#pragma unroll
    for (int i = 0; i < TM; ++i) a[i] = seed * (threadIdx.x + i);
#pragma unroll
    for (int j = 0; j < TN; ++j) b[j] = seed / (threadIdx.x + j + 1);
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0;
}

// Keeps the accumulators live: their sum goes to out[global thread index].
template <int TM, int TN>
__device__ __forceinline__ void store_sum(const double (&acc)[TM][TN], double* out)
{
    double sum = 0;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) sum += acc[i][j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// Makes the compiler assume every fragment value changed, as a GEMM's do
// from one k step to the next (no instruction is emitted).
template <int N>
__device__ __forceinline__ void clobber(double (&values)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+d"(values[i]));
}
