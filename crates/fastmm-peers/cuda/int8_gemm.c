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
 *   lt#i the i-th of cublasLt's heuristic candidates (up to 8)
 *   bat  cublasGemmStridedBatchedEx over BATCH products in the tn layout
 *        (the emulated product's moduli), time per product
 *   blk  the tn product as 2×2 blocks of C (four calls of m/2 × k × n/2)
 *
 *   nvcc -O2 -o int8_gemm int8_gemm.c -lcublas -lcublasLt
 *   ./int8_gemm M K N REPS [const|random] [BATCH]
 *
 * Data: every byte 3 in A and 5 in B (`const`, the default), or uniform
 * bytes in −128..127 (`random`, the residues' distribution: the tensor
 * cores draw more power on it). Each line: layout m k n median_ms tops
 * (2·m·k·n per product), after one untimed warm-up; the median of REPS
 * back-to-back products between CUDA events. C[0] and C[m·n−1] are
 * checked against the host's dot products.
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
static int batch = 1;
static cublasLtMatmulHeuristicResult_t found[8];
static int found_count = 0;

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
    } else if (layout[0] == 'b' && layout[1] == 'a') {
        /* The same A and B in every batch entry (stride 0): the rate, not
         * the data, is what is measured; C entries are distinct. */
        BLAS(cublasGemmStridedBatchedEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b,
                                        CUDA_R_8I, k, 0, a, CUDA_R_8I, k, 0, &zero, c,
                                        CUDA_R_32I, n, (long long)m * n, batch, CUBLAS_COMPUTE_32I,
                                        CUBLAS_GEMM_DEFAULT));
    } else if (layout[0] == 'b') {
        /* 2×2 blocks of C, each an m/2 × n/2 product of depth k. */
        int mh = m / 2, nh = n / 2;
        for (int bi = 0; bi < 2; bi++)
            for (int bj = 0; bj < 2; bj++) {
                int r0 = bi ? mh : 0, rows = bi ? m - mh : mh;
                int c0 = bj ? nh : 0, cols = bj ? n - nh : nh;
                BLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, cols, rows, k, &one,
                                  b + (size_t)c0 * k, CUDA_R_8I, k, a + (size_t)r0 * k,
                                  CUDA_R_8I, k, &zero, c + (size_t)r0 * n + c0, CUDA_R_32I, n,
                                  CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT));
            }
    } else {
        int i = layout[3] - '0';
        BLAS(cublasLtMatmul(lt, lt_desc, &one, b, lt_a, a, lt_b, &zero, c, lt_c, c, lt_c,
                            &found[i].algo, workspace, workspace_bytes, 0));
    }
}

/* C[i][j] for row-major A (m×k) and B: k-contiguous rows (tn) or k×n
 * row-major (nn). */
static long expected(const signed char *a, const signed char *b, int k, int n, int i, int j,
                     int nn) {
    long sum = 0;
    for (int p = 0; p < k; p++)
        sum += (long)a[(size_t)i * k + p] * (nn ? b[(size_t)p * n + j] : b[(size_t)j * k + p]);
    return sum;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s M K N REPS [const|random] [BATCH]\n", argv[0]);
        return 2;
    }
    int m = atoi(argv[1]), k = atoi(argv[2]), n = atoi(argv[3]), reps = atoi(argv[4]);
    int random = argc > 5 && argv[5][0] == 'r';
    if (argc > 6) batch = atoi(argv[6]);
    if (m < 2 || k < 1 || n < 2 || reps < 1 || batch < 1) return 2;
    size_t asz = (size_t)m * k, bsz = (size_t)k * n;
    signed char *ha = malloc(asz), *hb = malloc(bsz);
    unsigned long long x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < asz + bsz; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        signed char v = random ? (signed char)(x >> 56) : (i < asz ? 3 : 5);
        if (i < asz) ha[i] = v; else hb[i - asz] = v;
    }
    signed char *a, *b;
    int *c;
    CUDA(cudaMalloc((void **)&a, asz));
    CUDA(cudaMalloc((void **)&b, bsz));
    CUDA(cudaMalloc((void **)&c, (size_t)m * n * sizeof(int) * batch));
    CUDA(cudaMalloc(&workspace, workspace_bytes));
    CUDA(cudaMemcpy(a, ha, asz, cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(b, hb, bsz, cudaMemcpyHostToDevice));
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
    BLAS(cublasLtMatmulAlgoGetHeuristic(lt, lt_desc, lt_a, lt_b, lt_c, lt_c, pref, 8, found,
                                        &found_count));
    const char *layouts[] = {"tn", "nn", "blk", "bat", "lt#0", "lt#1", "lt#2", "lt#3",
                             "lt#4", "lt#5", "lt#6", "lt#7"};
    int nlayouts = 4 + found_count;
    float *ms = malloc(sizeof(float) * reps);
    cudaEvent_t *ev = malloc(sizeof(cudaEvent_t) * (reps + 1));
    for (int i = 0; i <= reps; i++) CUDA(cudaEventCreate(&ev[i]));
    for (int l = 0; l < nlayouts; l++) {
        const char *name = layouts[l];
        if (name[0] == 'b' && name[1] == 'a' && batch == 1) continue;
        product(name, m, k, n, a, b, c);
        CUDA(cudaDeviceSynchronize());
        for (int r = 0; r < reps; r++) {
            CUDA(cudaEventRecord(ev[r], 0));
            product(name, m, k, n, a, b, c);
            CUDA(cudaEventRecord(ev[r + 1], 0));
            CUDA(cudaEventSynchronize(ev[r + 1]));
            CUDA(cudaEventElapsedTime(&ms[r], ev[r], ev[r + 1]));
        }
        int nn = name[0] == 'n';
        int got[2];
        CUDA(cudaMemcpy(&got[0], c, sizeof(int), cudaMemcpyDeviceToHost));
        CUDA(cudaMemcpy(&got[1], c + (size_t)m * n - 1, sizeof(int), cudaMemcpyDeviceToHost));
        long want[2] = {expected(ha, hb, k, n, 0, 0, nn), expected(ha, hb, k, n, m - 1, n - 1, nn)};
        if (got[0] != want[0] || got[1] != want[1]) {
            fprintf(stderr, "%s: C ends = %d, %d, expected %ld, %ld\n", name, got[0], got[1],
                    want[0], want[1]);
            return 1;
        }
        qsort(ms, reps, sizeof(float), by_value);
        int per = name[0] == 'b' && name[1] == 'a' ? batch : 1;
        double median = ms[reps / 2] / per;
        printf("int8 %-4s %s m=%d k=%d n=%d median_ms=%.3f tops=%.1f\n", name,
               random ? "random" : "const", m, k, n, median, 2.0 * m * k * n / (median * 1e9));
        fflush(stdout);
    }
    return 0;
}
