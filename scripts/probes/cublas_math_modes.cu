// cuBLAS dgemm with its default math (FP64 tensor cores on sm_80+) against
// CUBLAS_PEDANTIC_MATH, which keeps to the FP64 FMA units: the SIMT
// reference for a SIMT f64 kernel. Row-major C = A·B computed as Cᵀ = BᵀAᵀ.
// Build: nvcc -O3 -arch=sm_90 cublas_math_modes.cu -lcublas -o cublas_math_modes
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "probe_check.h"

int main(int argc, char** argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 8192;
    const size_t count = (size_t)n * n;
    std::vector<double> host(count);
    srand(7);
    for (auto& v : host) v = rand() / (double)RAND_MAX - 0.5;
    double *a, *b, *c;
    CUDA_CHECK(cudaMalloc(&a, count * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&b, count * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&c, count * sizeof(double)));
    CUDA_CHECK(cudaMemcpy(a, host.data(), count * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b, host.data(), count * sizeof(double), cudaMemcpyHostToDevice));
    cublasHandle_t handle;
    CUBLAS_CHECK(cublasCreate(&handle));
    const double one = 1.0, zero = 0.0;
    const cublasMath_t modes[] = {CUBLAS_DEFAULT_MATH, CUBLAS_PEDANTIC_MATH};
    const char* names[] = {"default", "pedantic"};
    for (int mode = 0; mode < 2; ++mode) {
        CUBLAS_CHECK(cublasSetMathMode(handle, modes[mode]));
        CUBLAS_CHECK(cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b, n, a, n, &zero, c, n));
        CUDA_CHECK(cudaDeviceSynchronize());
        const float median = median_event_ms(
            [&] { CUBLAS_CHECK(cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b, n, a, n, &zero, c, n)); },
            7);
        printf("dgemm n=%d %s math: median %.3f ms, %.2f TFLOPS\n", n, names[mode], median,
               2.0 * n * (double)n * n / (median * 1e-3) / 1e12);
    }
    CUBLAS_CHECK(cublasDestroy(handle));
    return 0;
}
