// How close the DFMA pipe gets to its ceiling with few warps per scheduler
// (issue 6): each thread runs a register-only TM x TN outer-product update,
// acc[i][j] += a[i] * b[j], exactly the f64 SIMT GEMM's inner statement
// without its shared-memory loads, at 1 to 4 warps per scheduler.
// Build and run: nvcc -O3 -arch=sm_90 dfma_occupancy.cu -o occ && ./occ
#include <cstdio>
#include <cuda_runtime.h>

#include "dfma_kernels.cuh"

template <int TM, int TN, int THREADS, int MINB>
int measure(int sms)
{
    const int blocks = sms * MINB, iters = 1 << 14;
    double* out;
    CUDA_CHECK(cudaMalloc(&out, sizeof(double) * THREADS * blocks));
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    float best = 1e30f;
    for (int rep = 0; rep < 6; ++rep) {
        CUDA_CHECK(cudaEventRecord(start));
        outer_products<TM, TN, THREADS, MINB><<<blocks, THREADS>>>(out, iters, 1e-3);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaEventRecord(stop));
        CUDA_CHECK(cudaEventSynchronize(stop));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (rep > 0 && ms < best) best = ms;
    }
    const double flops = 2.0 * TM * TN * (double)iters * THREADS * blocks;
    printf("%2dx%-2d %3d threads x %d blocks/SM = %d warps/scheduler: %.2f TFLOPS\n", TM, TN, THREADS, MINB,
           THREADS * MINB / 128, flops / (best * 1e-3) / 1e12);
    CUDA_CHECK(cudaFree(out));
    return 0;
}

int main()
{
    int sms;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    measure<8, 8, 128, 1>(sms);
    measure<8, 8, 256, 1>(sms);
    measure<8, 6, 384, 1>(sms);
    measure<8, 4, 256, 2>(sms);
    measure<8, 4, 512, 1>(sms);
    measure<4, 4, 256, 4>(sms);
    return 0;
}
