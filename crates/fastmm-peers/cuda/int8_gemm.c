/*
 * The INT8 tensor-core rate that the emulated product builds on: C (m×n
 * INT32) = A (m×k INT8) · B (k×n INT8) through cublasGemmEx (compute
 * 32I) in the layouts a row-major caller can pass, and through
 * cublasLtMatmul with a workspace and the heuristic's choice:
 *
 *   tn   A row-major (k contiguous), B stored n×k (k contiguous): fastmm's
 *   nn   A and B row-major (B's rows n contiguous)
 *   lt   cublasLt, the tn layout, 256 MiB workspace
 *
 *   nvcc -O2 -o int8_gemm int8_gemm.c -lcublas -lcublasLt
 *   ./int8_gemm M K N REPS
 *
 * Each line: layout m k n median_ms tops (2·m·k·n per product), after one
 * untimed warm-up; the median of REPS back-to-back products between CUDA
 * events.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA(call)                                                              \
    do {                                                                        \
        cudaError_t e_ = (call);                                                \
        if (e_ != cudaSuccess) {                                                \
            fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));  \
            exit(1);                                                            \
        }                                                                       \
    } while (0)
#define BLAS(call)                                                              \
    do {                                                                        \
        int s_ = (int)(call);                                                   \
        if (s_ != 0) {                                                          \
            fprintf(stderr, "%s failed: status %d\n", #call, s_);               \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

static int by_value(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static cublasHandle_t blas;
static cublasLtHandle_t lt;
static cublasLtMatmulDesc_t lt_desc;
static cublasLtMatrixLayout_t lt_a, lt_b, lt_c;
static cublasLtMatmulAlgo_t lt_algo;
static void *workspace;
static size_t workspace_bytes = 256u << 20;

/* One product; column-major view: Cᵀ (n×m, ld n) = op(B')·A' with A' the
 * k×m column-major view of row-major A. */
static void product(const char *layout, int m, int k, int n, const signed char *a,
                    const signed char *b, int *c) {
    const int one = 1, zero = 0;
    if (layout[0] == 't') {
        BLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_8I, k, a,
                          CUDA_R_8I, k, &zero, c, CUDA_R_32I, n, CUBLAS_COMPUTE_32I,
                          CUBLAS_GEMM_DEFAULT));
    } else if (layout[0] == 'n') {
        BLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_8I, n, a,
                          CUDA_R_8I, k, &zero, c, CUDA_R_32I, n, CUBLAS_COMPUTE_32I,
                          CUBLAS_GEMM_DEFAULT));
    } else {
        BLAS(cublasLtMatmul(lt, lt_desc, &one, b, lt_a, a, lt_b, &zero, c, lt_c, c, lt_c,
                            &lt_algo, workspace, workspace_bytes, 0));
    }
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s M K N REPS\n", argv[0]);
        return 2;
    }
    int m = atoi(argv[1]), k = atoi(argv[2]), n = atoi(argv[3]), reps = atoi(argv[4]);
    if (m < 1 || k < 1 || n < 1 || reps < 1) return 2;
    signed char *a, *b;
    int *c;
    CUDA(cudaMalloc((void **)&a, (size_t)m * k));
    CUDA(cudaMalloc((void **)&b, (size_t)k * n));
    CUDA(cudaMalloc((void **)&c, (size_t)m * n * sizeof(int)));
    CUDA(cudaMalloc(&workspace, workspace_bytes));
    CUDA(cudaMemset(a, 3, (size_t)m * k));
    CUDA(cudaMemset(b, 5, (size_t)k * n));
    BLAS(cublasCreate(&blas));
    BLAS(cublasLtCreate(&lt));
    BLAS(cublasLtMatmulDescCreate(&lt_desc, CUBLAS_COMPUTE_32I, CUDA_R_32I));
    cublasOperation_t t = CUBLAS_OP_T;
    BLAS(cublasLtMatmulDescSetAttribute(lt_desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    BLAS(cublasLtMatrixLayoutCreate(&lt_a, CUDA_R_8I, k, n, k));
    BLAS(cublasLtMatrixLayoutCreate(&lt_b, CUDA_R_8I, k, m, k));
    BLAS(cublasLtMatrixLayoutCreate(&lt_c, CUDA_R_32I, n, m, n));
    cublasLtMatmulPreference_t pref;
    BLAS(cublasLtMatmulPreferenceCreate(&pref));
    BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &workspace_bytes, sizeof(workspace_bytes)));
    cublasLtMatmulHeuristicResult_t found;
    int count = 0;
    BLAS(cublasLtMatmulAlgoGetHeuristic(lt, lt_desc, lt_a, lt_b, lt_c, lt_c, pref, 1, &found,
                                        &count));
    if (count < 1) {
        fprintf(stderr, "cublasLt: no INT8 algorithm for %d×%d×%d\n", m, k, n);
        return 1;
    }
    lt_algo = found.algo;
    const char *layouts[] = {"tn", "nn", "lt"};
    float *ms = malloc(sizeof(float) * reps);
    cudaEvent_t *ev = malloc(sizeof(cudaEvent_t) * (reps + 1));
    for (int i = 0; i <= reps; i++) CUDA(cudaEventCreate(&ev[i]));
    for (int l = 0; l < 3; l++) {
        product(layouts[l], m, k, n, a, b, c);
        CUDA(cudaDeviceSynchronize());
        for (int r = 0; r < reps; r++) {
            CUDA(cudaEventRecord(ev[r], 0));
            product(layouts[l], m, k, n, a, b, c);
            CUDA(cudaEventRecord(ev[r + 1], 0));
            CUDA(cudaEventSynchronize(ev[r + 1]));
            CUDA(cudaEventElapsedTime(&ms[r], ev[r], ev[r + 1]));
        }
        int check = 0;
        CUDA(cudaMemcpy(&check, c, sizeof(int), cudaMemcpyDeviceToHost));
        if (check != 15 * k) {
            fprintf(stderr, "%s: C[0] = %d, expected %d\n", layouts[l], check, 15 * k);
            return 1;
        }
        qsort(ms, reps, sizeof(float), by_value);
        double median = ms[reps / 2];
        printf("int8 %s m=%d k=%d n=%d median_ms=%.3f tops=%.1f\n", layouts[l], m, k, n, median,
               2.0 * m * k * n / (median * 1e9));
    }
    return 0;
}
