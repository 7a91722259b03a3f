// cuBLAS's FP32 emulation (BF16x9) against its sgemm and TF32 on this GPU:
// time (median of 11 calls, CUDA events) and error against a cuBLAS dgemm of
// the same operands (relative Frobenius, and the largest |C^ - C|/(|A||B|))
// of the first product, for a strided batch of B products of n x n x n,
// uniform [-1, 1) and wide-exponent (2^-8..2^7) inputs. Whether cuBLAS runs
// the emulation at all shows as a time and error different from sgemm's.
//
//   nvcc -O2 -arch=sm_90 -o fp32_emulation fp32_emulation.cu -lcublas
//   ./fp32_emulation N BATCH        (e.g. 2048 64, 8192 1)
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#define CUDA(x) do { cudaError_t e_ = (x); if (e_) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1);} } while (0)
#define BLAS(x) do { int s_ = (int)(x); if (s_) { printf("%s: status %d\n", #x, s_); return -1;} } while (0)
__global__ void fill(float* x, long long len, unsigned seed, int wide) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= len) return;
  unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
  float u = (h & 0xffffff) / 16777216.0f * 2 - 1;
  if (wide) { unsigned g = (h >> 24) % 16; u = ldexpf(u, (int)g - 8); }
  x[i] = u;
}
__global__ void widen(const float* x, double* y, long long len, int absval) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < len) y[i] = absval ? fabs((double)x[i]) : (double)x[i];
}
__global__ void errs(const float* c, const double* ex, const double* bound, long long len, double* out) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= len) return;
  double d = (double)c[i] - ex[i];
  atomicAdd(&out[0], d * d); atomicAdd(&out[1], ex[i] * ex[i]);
  double r = fabs(d) / bound[i];
  unsigned long long* m = (unsigned long long*)&out[2];
  atomicMax(m, __double_as_longlong(r));
}
static int n, B; static float *a, *b, *c; static cublasHandle_t h;
static int call(cublasComputeType_t ct) {
  float one = 1, zero = 0; long long s = (long long)n * n;
  BLAS(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b, CUDA_R_32F, n, s, a, CUDA_R_32F, n, s, &zero, c, CUDA_R_32F, n, s, B, ct, CUBLAS_GEMM_DEFAULT));
  return 0;
}
static float timeit(cublasComputeType_t ct) {
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1); float t[11];
  if (call(ct)) return -1; CUDA(cudaDeviceSynchronize());
  for (int r = 0; r < 11; r++) { cudaEventRecord(e0); call(ct); cudaEventRecord(e1); cudaEventSynchronize(e1); cudaEventElapsedTime(&t[r], e0, e1); }
  for (int i = 0; i < 11; i++) for (int j = i + 1; j < 11; j++) if (t[j] < t[i]) { float x = t[i]; t[i] = t[j]; t[j] = x; }
  return t[5];
}
int main(int argc, char** argv) {
  n = atoi(argv[1]); B = atoi(argv[2]);
  long long s = (long long)n * n, len = s * B;
  CUDA(cudaMalloc(&a, len * 4)); CUDA(cudaMalloc(&b, len * 4)); CUDA(cudaMalloc(&c, len * 4));
  double *ad, *bd, *ex, *bound, *out;
  CUDA(cudaMalloc(&ad, s * 8)); CUDA(cudaMalloc(&bd, s * 8)); CUDA(cudaMalloc(&ex, s * 8)); CUDA(cudaMalloc(&bound, s * 8)); CUDA(cudaMalloc(&out, 24));
  cublasCreate(&h);
  cublasComputeType_t cts[] = {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_EMULATED_16BFX9, CUBLAS_COMPUTE_32F_FAST_TF32};
  const char* names[] = {"sgemm (32F)", "BF16x9 (32F_EMULATED_16BFX9)", "TF32"};
  for (int wide = 0; wide < 2; wide++) {
    int th = 256; long long g = (len + th - 1) / th, gs = (s + th - 1) / th;
    fill<<<g, th>>>(a, len, 17u, wide); fill<<<g, th>>>(b, len, 91u, wide);
    widen<<<gs, th>>>(a, ad, s, 0); widen<<<gs, th>>>(b, bd, s, 0);
    double one = 1, zero = 0;
    cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, bd, n, ad, n, &zero, ex, n);
    widen<<<gs, th>>>(a, ad, s, 1); widen<<<gs, th>>>(b, bd, s, 1);
    cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, bd, n, ad, n, &zero, bound, n);
    CUDA(cudaDeviceSynchronize());
    for (int v = 0; v < 3; v++) {
      for (int mode = 0; mode < 2; mode++) {
        if (v != 1 && mode) continue;
        cublasSetMathMode(h, mode ? CUBLAS_FP32_EMULATED_BF16X9_MATH : CUBLAS_DEFAULT_MATH);
        if (mode) cublasSetEmulationStrategy(h, CUBLAS_EMULATION_STRATEGY_EAGER);
        cublasComputeType_t ct = mode ? CUBLAS_COMPUTE_32F : cts[v];
        float ms = timeit(ct);
        CUDA(cudaMemset(out, 0, 24));
        errs<<<gs, th>>>(c, ex, bound, s, out); double o[3]; CUDA(cudaMemcpy(o, out, 24, cudaMemcpyDeviceToHost));
        printf("%s n=%d batch=%d %-40s%s %8.3f ms %7.1f TFLOPS  rel.frob %.2e  max|err|/(|A||B|) %.2e\n", wide ? "wide" : "uniform", n, B, names[v], mode ? " via math mode, eager" : "", ms, 2.0 * n * n * (double)n * B / ms / 1e9, sqrt(o[0] / o[1]), o[2]);
        cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
        cudaGetLastError();
      }
    }
  }
  return 0;
}
