/* An unchanged program's cuBLAS GEMM calls, each printed with the status
 * it got and the record the stand-in cuBLAS kept of what it received:
 * plain, transposed, conjugate, strided, 64-bit, typed-by-argument and
 * pointer-array calls, and ones cuBLAS refuses. Run with and without the
 * interposer preloaded, the output must be the same where no GPU takes a
 * call over. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

const char *stub_last(void);
void stub_base(const void *);
int cublasSgemm_v2(void *, int, int, int, int, int, const float *, const float *, int,
                   const float *, int, const float *, float *, int);
int cublasDgemm_v2(void *, int, int, int, int, int, const double *, const double *, int,
                   const double *, int, const double *, double *, int);
int cublasDgemm_v2_64(void *, int, int, int64_t, int64_t, int64_t, const double *,
                      const double *, int64_t, const double *, int64_t, const double *,
                      double *, int64_t);
int cublasZgemm_v2(void *, int, int, int, int, int, const double *, const double *, int,
                   const double *, int, const double *, double *, int);
int cublasDgemmStridedBatched(void *, int, int, int, int, int, const double *, const double *,
                              int, long long, const double *, int, long long, const double *,
                              double *, int, long long, int);
int cublasGemmEx(void *, int, int, int, int, int, const void *, const void *, int, int,
                 const void *, int, int, const void *, void *, int, int, int, int);
int cublasGemmBatchedEx(void *, int, int, int, int, int, const void *, const void *const *, int,
                        int, const void *const *, int, int, const void *, void *const *, int,
                        int, int, int, int);

static double M[3 * 4096], *A = M, *B = M + 4096, *C = M + 8192;

#define SHOW(call) printf("%d %s\n", (call), stub_last())

int main(void) {
    void *h = (void *)0x1234;
    stub_base(M);
    float fa = 2.5f, fb = 0.0f;
    double da = 1.5, db = -0.5, za[2] = {1, 0}, zb[2] = {0, 0}, zc[2] = {0.5, 2};
    SHOW(cublasSgemm_v2(h, 0, 0, 7, 5, 3, &fa, (float *)A, 7, (float *)B, 3, &fb, (float *)C, 9));
    SHOW(cublasDgemm_v2(h, 1, 0, 7, 5, 3, &da, A, 3, B, 3, &db, C, 7));
    SHOW(cublasDgemm_v2(h, 0, 1, 7, 5, 3, &da, A, 7, B, 5, &db, C, 7));
    SHOW(cublasDgemm_v2(h, 2, 2, 7, 5, 3, &da, A, 3, B, 5, &db, C, 7));
    /* Refused by cuBLAS: a negative dimension; too small an lda. */
    SHOW(cublasDgemm_v2(h, 0, 0, -1, 5, 3, &da, A, 7, B, 3, &db, C, 7));
    SHOW(cublasDgemm_v2(h, 0, 0, 7, 5, 3, &da, A, 6, B, 3, &db, C, 7));
    /* Quick returns: an empty C, an empty inner dimension. */
    SHOW(cublasDgemm_v2(h, 0, 0, 0, 5, 3, &da, A, 1, B, 3, &db, C, 1));
    SHOW(cublasDgemm_v2(h, 0, 0, 7, 5, 0, &da, A, 7, B, 1, &db, C, 7));
    SHOW(cublasDgemm_v2_64(h, 1, 1, 70000000000LL, 5, 3, &da, A, 3, B, 5, &db, C, 70000000000LL));
    SHOW(cublasZgemm_v2(h, 0, 0, 4, 4, 4, za, A, 4, B, 4, zb, C, 4));
    SHOW(cublasZgemm_v2(h, 2, 0, 4, 4, 4, zc, A, 4, B, 4, zb, C, 4));
    SHOW(cublasDgemmStridedBatched(h, 0, 0, 7, 5, 3, &da, A, 7, 21, B, 3, 0, &db, C, 7, 35, 3));
    SHOW(cublasDgemmStridedBatched(h, 0, 0, 7, 5, 3, &da, A, 7, 21, B, 3, 0, &db, C, 7, 0, 3));
    /* GemmEx: float's own product (R_32F, COMPUTE_32F); TF32 compute;
     * mixed types. */
    SHOW(cublasGemmEx(h, 0, 0, 7, 5, 3, &fa, A, 0, 7, B, 0, 3, &fb, C, 0, 7, 68, -1));
    SHOW(cublasGemmEx(h, 0, 0, 7, 5, 3, &fa, A, 0, 7, B, 0, 3, &fb, C, 0, 7, 77, -1));
    SHOW(cublasGemmEx(h, 0, 0, 7, 5, 3, &fa, A, 2, 7, B, 2, 3, &fb, C, 0, 7, 68, -1));
    const void *as[2] = {A, A + 100}, *bs[2] = {B, B + 100};
    void *cs[2] = {C, C + 100};
    SHOW(cublasGemmBatchedEx(h, 0, 0, 7, 5, 3, &da, as, 1, 7, bs, 1, 3, &db, cs, 1, 7, 2, 70, -1));
    /* The interposer's counts, where it is preloaded (on stderr: the
     * output is the same either way). */
    uint64_t (*taken)(void) = (uint64_t (*)(void))dlsym(RTLD_DEFAULT, "fastmm_cublas_taken");
    uint64_t (*declined)(void) = (uint64_t (*)(void))dlsym(RTLD_DEFAULT, "fastmm_cublas_declined");
    if (taken && declined)
        fprintf(stderr, "counts: taken %llu declined %llu\n", (unsigned long long)taken(),
                (unsigned long long)declined());
    return 0;
}
