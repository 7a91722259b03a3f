/*
 * The cuBLASXt peer of fastmm's host-resident multi-GPU product: C = A·B
 * (f32, n×n, in host memory) with cublasXtSgemm over the given GPUs, its
 * pinning mode on or off, timed whole (as fastmm's host-resident product
 * is: from the call to C complete in host memory).
 *
 *   nvcc -O2 -o cublasxt_sgemm cublasxt_sgemm.c -lcublas
 *   ./cublasxt_sgemm [-b BLOCK] N REPS PIN(0|1|2) GPU [GPU...]
 *
 * BLOCK is cuBLASXt's tile edge (cublasXtSetBlockDim; its default is
 * 1024, which is far from its best on large products, so a fair
 * comparison sweeps it). PIN 2 allocates the matrices page-locked
 * (cudaMallocHost), as a user who tunes cuBLASXt would, instead of
 * letting it pin them on every call.
 *
 * Prints one line per repetition and a last line
 *   cublasxt n=N gpus=G pinning=P block=B median_ms=… tflops=…
 */
#include <cublasXt.h>
#include <cuda_runtime.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(call)                                                       \
    do {                                                                  \
        cublasStatus_t s_ = (call);                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                \
            fprintf(stderr, "%s failed: status %d\n", #call, (int)s_);    \
            return 1;                                                     \
        }                                                                 \
    } while (0)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int block = 0;
    if (argc > 2 && strcmp(argv[1], "-b") == 0) {
        block = atoi(argv[2]);
        argv += 2;
        argc -= 2;
    }
    if (argc < 5 || block < 0) {
        fprintf(stderr, "usage: cublasxt_sgemm [-b BLOCK] N REPS PIN GPU [GPU...]\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 10);
    int reps = atoi(argv[2]);
    int pin = atoi(argv[3]);
    int gpus = argc - 4;
    int *ids = malloc(sizeof(int) * gpus);
    for (int i = 0; i < gpus; i++) ids[i] = atoi(argv[4 + i]);
    float *a = NULL, *b = NULL, *c = NULL;
    if (pin == 2) {
        size_t bytes = n * n * sizeof(float);
        if (cudaMallocHost((void **)&a, bytes) != cudaSuccess ||
            cudaMallocHost((void **)&b, bytes) != cudaSuccess ||
            cudaMallocHost((void **)&c, bytes) != cudaSuccess) {
            fprintf(stderr, "cannot allocate page-locked %zu×%zu matrices\n", n, n);
            return 1;
        }
    } else {
        a = malloc(n * n * sizeof(float));
        b = malloc(n * n * sizeof(float));
        c = malloc(n * n * sizeof(float));
    }
    double *ms = malloc(sizeof(double) * (reps > 0 ? reps : 1));
    if (!a || !b || !c || !ms || reps < 1) {
        fprintf(stderr, "cannot allocate %zu×%zu matrices\n", n, n);
        return 1;
    }
    unsigned long long x = 42;
    for (size_t i = 0; i < n * n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        a[i] = (float)((x >> 40) & 0xffff) / 32768.0f - 1.0f;
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        b[i] = (float)((x >> 40) & 0xffff) / 32768.0f - 1.0f;
    }
    cublasXtHandle_t h;
    CHECK(cublasXtCreate(&h));
    CHECK(cublasXtDeviceSelect(h, gpus, ids));
    CHECK(cublasXtSetPinningMemMode(h, pin == 1 ? CUBLASXT_PINNING_ENABLED : CUBLASXT_PINNING_DISABLED));
    if (block > 0) CHECK(cublasXtSetBlockDim(h, block));
    CHECK(cublasXtGetBlockDim(h, &block));
    const float one = 1.0f, zero = 0.0f;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        CHECK(cublasXtSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
        ms[r] = 1e3 * (now_s() - t0);
        printf("rep %d: %.1f ms\n", r, ms[r]);
        fflush(stdout);
    }
    qsort(ms, reps, sizeof(double), by_value);
    double median = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
    printf("cublasxt n=%zu gpus=%d pinning=%d block=%d median_ms=%.1f tflops=%.2f\n", n, gpus, pin,
           block, median, 2.0 * n * n * n / (median * 1e9));
    CHECK(cublasXtDestroy(h));
    return 0;
}
