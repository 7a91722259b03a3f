/*
 * The split-TF32 peer ("3xTF32") of fastmm's f32-accurate tensor-core
 * product, on cuBLAS: A = A_hi + A_lo with A_hi = A rounded to TF32's
 * 10-bit mantissa (to nearest, ties away) and A_lo = A − A_hi (exact in
 * f32), B likewise, and
 *
 *   C = A_lo·B_hi + A_hi·B_lo + A_hi·B_hi
 *
 * as three cublasGemmEx calls in CUBLAS_COMPUTE_32F_FAST_TF32 (small
 * terms first, beta = 1). Beside it, in the same process and on the same
 * inputs: cuBLAS sgemm (IEEE f32) and one TF32 product. Each product's
 * time is the median of REPS back-to-back runs between CUDA events after
 * a warm-up, the splits included; its errors are against a dgemm of the
 * same inputs (exact to f32's scale): the relative Frobenius error and
 * max |Ĉ − C|_ij/(|A||B|)_ij.
 *
 *   nvcc -O2 -o split_tf32 split_tf32.cu -lcublas
 *   ./split_tf32 N REPS [SEED]
 *
 * Inputs: uniform in [−1, 1) from a fixed generator. Prints, per product,
 *   peer=NAME n=N median_ms=… tflops=… rel_error=… max_scaled=…
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA(call)                                                             \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)
#define BLAS(call)                                                             \
    do {                                                                       \
        cublasStatus_t s_ = (call);                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                     \
            fprintf(stderr, "%s failed: status %d\n", #call, (int)s_);         \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* hi = x rounded to 10 mantissa bits (ties away from zero), lo = x − hi. */
__global__ void split(const float *x, float *hi, float *lo, size_t count) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= count) return;
    float v = x[i];
    float h = __uint_as_float((__float_as_uint(v) + 0x1000u) & 0xffffe000u);
    hi[i] = h;
    lo[i] = v - h;
}

__global__ void widen(const float *x, double *y, double *ay, size_t count) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= count) return;
    y[i] = (double)x[i];
    ay[i] = fabs((double)x[i]);
}

/* Per block: Σ (c − ref)², Σ ref², max |c − ref|/scale. */
__global__ void errors(const float *c, const double *ref, const double *scale, size_t count,
                       double *out) {
    __shared__ double d2[256], r2[256], mx[256];
    double a = 0, b = 0, m = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        double d = (double)c[i] - ref[i];
        a += d * d;
        b += ref[i] * ref[i];
        double s = scale[i] > 0 ? fabs(d) / scale[i] : (d != 0 ? INFINITY : 0);
        m = fmax(m, s);
    }
    d2[threadIdx.x] = a;
    r2[threadIdx.x] = b;
    mx[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) {
            d2[threadIdx.x] += d2[threadIdx.x + s];
            r2[threadIdx.x] += r2[threadIdx.x + s];
            mx[threadIdx.x] = fmax(mx[threadIdx.x], mx[threadIdx.x + s]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[3 * blockIdx.x] = d2[0];
        out[3 * blockIdx.x + 1] = r2[0];
        out[3 * blockIdx.x + 2] = mx[0];
    }
}

static int by_value(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Column-major cuBLAS on row-major data: C^T = B^T·A^T. */
static void gemm_tf32(cublasHandle_t h, int n, const float *a, const float *b, float beta,
                      float *c) {
    const float one = 1.0f;
    BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b, CUDA_R_32F, n, a,
                      CUDA_R_32F, n, &beta, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32,
                      CUBLAS_GEMM_DEFAULT));
}

enum Kind { SGEMM, TF32, SPLIT };

struct Buffers {
    float *a, *b, *ahi, *alo, *bhi, *blo, *c;
};

static void product(cublasHandle_t h, enum Kind kind, int n, struct Buffers *x) {
    size_t count = (size_t)n * n;
    const float one = 1.0f, zero = 0.0f;
    switch (kind) {
    case SGEMM:
        BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, x->b, n, x->a, n, &zero,
                         x->c, n));
        break;
    case TF32:
        gemm_tf32(h, n, x->a, x->b, 0.0f, x->c);
        break;
    case SPLIT: {
        unsigned blocks = (unsigned)((count + 255) / 256);
        split<<<blocks, 256>>>(x->a, x->ahi, x->alo, count);
        split<<<blocks, 256>>>(x->b, x->bhi, x->blo, count);
        CUDA(cudaGetLastError());
        gemm_tf32(h, n, x->alo, x->bhi, 0.0f, x->c);
        gemm_tf32(h, n, x->ahi, x->blo, 1.0f, x->c);
        gemm_tf32(h, n, x->ahi, x->bhi, 1.0f, x->c);
        break;
    }
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s N REPS [SEED]\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    int reps = atoi(argv[2]);
    uint64_t state = argc > 3 ? strtoull(argv[3], NULL, 10) : 42;
    if (n <= 0 || reps <= 0) {
        fprintf(stderr, "N and REPS must be positive\n");
        return 2;
    }
    size_t count = (size_t)n * n;
    float *host = (float *)malloc(2 * count * sizeof(float));
    if (!host) {
        fprintf(stderr, "out of host memory\n");
        return 1;
    }
    for (size_t i = 0; i < 2 * count; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        host[i] = (float)((double)(state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    }
    cublasHandle_t h;
    BLAS(cublasCreate(&h));
    struct Buffers x;
    float **all[] = {&x.a, &x.b, &x.ahi, &x.alo, &x.bhi, &x.blo, &x.c};
    for (int i = 0; i < 7; i++) CUDA(cudaMalloc((void **)all[i], count * sizeof(float)));
    CUDA(cudaMemcpy(x.a, host, count * sizeof(float), cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(x.b, host + count, count * sizeof(float), cudaMemcpyHostToDevice));

    /* The reference and |A||B| in f64. */
    double *a64, *b64, *aa64, *ab64, *ref, *scale, *partial;
    double **wide[] = {&a64, &b64, &aa64, &ab64, &ref, &scale};
    for (int i = 0; i < 6; i++) CUDA(cudaMalloc((void **)wide[i], count * sizeof(double)));
    unsigned blocks = (unsigned)((count + 255) / 256);
    widen<<<blocks, 256>>>(x.a, a64, aa64, count);
    widen<<<blocks, 256>>>(x.b, b64, ab64, count);
    CUDA(cudaGetLastError());
    const double one = 1.0, zero = 0.0;
    BLAS(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b64, n, a64, n, &zero, ref, n));
    BLAS(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, ab64, n, aa64, n, &zero, scale,
                     n));
    CUDA(cudaFree(a64));
    CUDA(cudaFree(b64));
    CUDA(cudaFree(aa64));
    CUDA(cudaFree(ab64));
    const unsigned reduce_blocks = 1024;
    CUDA(cudaMalloc((void **)&partial, 3 * reduce_blocks * sizeof(double)));
    double *partial_host = (double *)malloc(3 * reduce_blocks * sizeof(double));

    const char *names[] = {"sgemm", "tf32", "split-tf32"};
    float *times = (float *)malloc(reps * sizeof(float));
    cudaEvent_t start, stop;
    CUDA(cudaEventCreate(&start));
    CUDA(cudaEventCreate(&stop));
    for (int kind = SGEMM; kind <= SPLIT; kind++) {
        product(h, (enum Kind)kind, n, &x);
        CUDA(cudaDeviceSynchronize());
        for (int r = 0; r < reps; r++) {
            CUDA(cudaEventRecord(start));
            product(h, (enum Kind)kind, n, &x);
            CUDA(cudaEventRecord(stop));
            CUDA(cudaEventSynchronize(stop));
            CUDA(cudaEventElapsedTime(&times[r], start, stop));
        }
        qsort(times, reps, sizeof(float), by_value);
        double ms = times[reps / 2];
        errors<<<reduce_blocks, 256>>>(x.c, ref, scale, count, partial);
        CUDA(cudaGetLastError());
        CUDA(cudaMemcpy(partial_host, partial, 3 * reduce_blocks * sizeof(double),
                        cudaMemcpyDeviceToHost));
        double d2 = 0, r2 = 0, mx = 0;
        for (unsigned i = 0; i < reduce_blocks; i++) {
            d2 += partial_host[3 * i];
            r2 += partial_host[3 * i + 1];
            mx = fmax(mx, partial_host[3 * i + 2]);
        }
        printf("peer=%s n=%d median_ms=%.3f tflops=%.1f rel_error=%.3e max_scaled=%.3e\n",
               names[kind], n, ms, 2.0 * n * (double)n * n / (ms * 1e9), sqrt(d2 / r2), mx);
        fflush(stdout);
    }
    BLAS(cublasDestroy(h));
    return 0;
}
