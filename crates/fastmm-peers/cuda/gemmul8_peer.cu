/*
 * A C entry point onto GEMMul8 (RIKEN-RCCS/GEMMul8, MIT), the public
 * Ozaki-II library that fastmm's emulated product is measured against,
 * plus an exact reference for sampled rows. Nothing of GEMMul8 is kept in
 * this tree: scripts/gemmul8-peer.sh compiles this file on the GPU machine
 * against a copy of GEMMul8's sources named by GEMMUL8_DIR
 * (-I$GEMMUL8_DIR/include -I$GEMMUL8_DIR/src), instantiating only the two
 * real INT8 products called here, which takes under a minute where the
 * library's whole gemmul8.cu takes about ten.
 *
 * Row-major operands as torch holds them: C = A·B (m×k times k×n) is, in
 * the column-major convention of cuBLAS and GEMMul8, Cᵀ = Bᵀ·Aᵀ, so B is
 * passed first.
 *
 *   peer_gemmul8_work(f64, m, k, n, moduli)       workspace bytes
 *   peer_gemmul8(f64, stream, m, k, n, a, b, c, moduli, fast, work)
 *   peer_reference_rows(f64, stream, k, n, a, b, rows, count, ref, mag)
 *
 * Every call returns 0, or a nonzero code after printing what failed.
 */
#include "gemmul8.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include <dlfcn.h>

#include <cuComplex.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

// GEMMul8's implementation headers, in the order its own translation unit
// includes them; only the templates instantiated below are compiled.
#include "self_hipify.hpp"
#include "template_type.hpp"
#include "common.hpp"
#include "template_math.hpp"
#include "table.hpp"
#include "find_max.hpp"
#include "mod.hpp"
#include "matmult.hpp"
#include "scaling.hpp"
#include "scaling_fast_real.hpp"
#include "scaling_fast_complex.hpp"
#include "scaling_accu_real.hpp"
#include "scaling_accu_complex.hpp"
#include "conv_hi2mid_real.hpp"
#include "conv_hi2mid_complex.hpp"
#include "inverse_scaling_real.hpp"
#include "inverse_scaling_complex.hpp"
#include "gemmul8_real.hpp"

namespace {

int check_cuda(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 0;
    std::fprintf(stderr, "gemmul8_peer: %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

int check_blas(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    std::fprintf(stderr, "gemmul8_peer: %s: cuBLAS status %d\n", what, (int)s);
    return 2;
}

// One cuBLAS handle for the process, set to each call's stream: GEMMul8
// sets its own workspace on the handle it is given, so it gets one that
// nothing else uses.
cublasHandle_t peer_handle() {
    static cublasHandle_t handle = nullptr;
    if (handle == nullptr && check_blas(cublasCreate(&handle), "cublasCreate") != 0) handle = nullptr;
    return handle;
}

template <typename T>
int run(cudaStream_t stream, size_t m, size_t k, size_t n, const void *a, const void *b, void *c,
        unsigned moduli, bool fast, void *work) {
    cublasHandle_t handle = peer_handle();
    if (handle == nullptr) return 2;
    if (int e = check_blas(cublasSetStream(handle, stream), "cublasSetStream")) return e;
    const T one = 1, zero = 0;
    // Cᵀ (n×m, ld n) = Bᵀ (n×k, ld n) · Aᵀ (k×m, ld k), column-major.
    real::gemm<T, gemmul8::Backend::INT8>(Handle_t(CublasTag{}, handle), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k,
                                          &one, static_cast<const T *>(b), n, static_cast<const T *>(a), k,
                                          &zero, static_cast<T *>(c), n, moduli, fast, work, nullptr,
                                          nullptr, false, false, false, false, stream);
    return check_cuda(cudaGetLastError(), "GEMMul8's product");
}

// a·b exactly rounded to about 2^-106 (Dot2: error-free products by fma,
// error-free sums), and sum |a||b|, for row rows[r] of A and every column
// j: one thread per element.
template <typename T>
__global__ void reference_rows(size_t k, size_t n, const T *__restrict__ a, const T *__restrict__ b,
                               const long long *__restrict__ rows, int count, double *__restrict__ ref,
                               double *__restrict__ mag) {
    const size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const int r = blockIdx.y;
    if (j >= n || r >= count) return;
    const T *row = a + (size_t)rows[r] * k;
    double s = 0.0, c = 0.0, m = 0.0;
    for (size_t p = 0; p < k; ++p) {
        const double x = (double)row[p], y = (double)b[p * n + j];
        const double h = x * y;
        const double l = fma(x, y, -h);
        const double t = s + h;
        const double z = t - s;
        c += ((s - (t - z)) + (h - z)) + l;
        s = t;
        m += fabs(h);
    }
    ref[(size_t)r * n + j] = s + c;
    mag[(size_t)r * n + j] = m;
}

} // namespace

extern "C" {

size_t peer_gemmul8_work(int f64, size_t m, size_t k, size_t n, unsigned moduli) {
    (void)f64;
    // The library's real workSize, whose exported specialisation lives in
    // the gemmul8.cu that is not compiled here.
    return real::workSize<gemmul8::Backend::INT8>(n, m, k, moduli, false, false, nullptr, nullptr);
}

int peer_gemmul8(int f64, unsigned long long stream, size_t m, size_t k, size_t n, const void *a,
                 const void *b, void *c, unsigned moduli, int fast, void *work) {
    auto s = reinterpret_cast<cudaStream_t>(stream);
    return f64 ? run<double>(s, m, k, n, a, b, c, moduli, fast != 0, work)
               : run<float>(s, m, k, n, a, b, c, moduli, fast != 0, work);
}

int peer_reference_rows(int f64, unsigned long long stream, size_t k, size_t n, const void *a,
                        const void *b, const long long *rows, int count, double *ref, double *mag) {
    auto s = reinterpret_cast<cudaStream_t>(stream);
    const dim3 grid((unsigned)((n + 255) / 256), (unsigned)count);
    if (f64)
        reference_rows<double><<<grid, 256, 0, s>>>(k, n, static_cast<const double *>(a),
                                                   static_cast<const double *>(b), rows, count, ref, mag);
    else
        reference_rows<float><<<grid, 256, 0, s>>>(k, n, static_cast<const float *>(a),
                                                  static_cast<const float *>(b), rows, count, ref, mag);
    return check_cuda(cudaGetLastError(), "reference rows");
}

} // extern "C"
