// Error checks shared by the standalone CUDA probes: every CUDA runtime and
// cuBLAS / cuBLASLt call goes through one of these, which prints where it
// failed and exits.
#pragma once
#include <cstdio>
#include <cstdlib>
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

