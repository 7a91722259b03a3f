/* A stand-in libcublas for the interposer's tests where no GPU exists: the
 * handle getters and some of the GEMM names the interposer exports, each
 * writing its name and every argument it received into a record the
 * caller reads (stub_last), and returning a status that depends on them
 * (a negative dimension: CUBLAS_STATUS_INVALID_VALUE, 7; else success),
 * so that a call passed on can be told apart from one answered by
 * anything else. */
#include <stdint.h>
#include <stdio.h>

static char last[640];
const char *stub_last(void) { return last; }

/* Addresses are recorded as offsets from the caller's base, the same in
 * every run. */
static const char *base;
void stub_base(const void *b) { base = b; }
static long long off(const void *p) { return (long long)((const char *)p - base); }

int cublasGetPointerMode_v2(void *h, int *mode) { (void)h; *mode = 0; return 0; }
int cublasGetMathMode(void *h, int *mode) { (void)h; *mode = 0; return 0; }
int cublasGetStream_v2(void *h, void **stream) { (void)h; *stream = (void *)0x5eed; return 0; }

static int status(int64_t m, int64_t n, int64_t k) { return (m < 0 || n < 0 || k < 0) ? 7 : 0; }

/* The common part of a record: name, handle, operations, shape, leading
 * dimensions and addresses, and α, β (their first parts). */
static void note(const char *name, void *h, int ta, int tb, int64_t m, int64_t n, int64_t k,
                 const void *a, int64_t lda, const void *b, int64_t ldb, const void *c,
                 int64_t ldc, double alpha, double beta, const char *more) {
    snprintf(last, sizeof last,
             "%s h=%p ops=%d,%d mnk=%lld,%lld,%lld a=%lld/%lld b=%lld/%lld c=%lld/%lld alpha=%g beta=%g%s",
             name, h, ta, tb, (long long)m, (long long)n, (long long)k, off(a), (long long)lda,
             off(b), (long long)ldb, off(c), (long long)ldc, alpha, beta, more);
}

int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha,
                   const float *a, int lda, const float *b, int ldb, const float *beta,
                   float *c, int ldc) {
    note(__func__, h, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, *alpha, *beta, "");
    return status(m, n, k);
}

int cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *alpha,
                   const double *a, int lda, const double *b, int ldb, const double *beta,
                   double *c, int ldc) {
    note(__func__, h, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, *alpha, *beta, "");
    return status(m, n, k);
}

int cublasDgemm_v2_64(void *h, int ta, int tb, int64_t m, int64_t n, int64_t k,
                      const double *alpha, const double *a, int64_t lda, const double *b,
                      int64_t ldb, const double *beta, double *c, int64_t ldc) {
    note(__func__, h, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, *alpha, *beta, "");
    return status(m, n, k);
}

int cublasZgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *alpha,
                   const double *a, int lda, const double *b, int ldb, const double *beta,
                   double *c, int ldc) {
    char more[64];
    snprintf(more, sizeof more, " alpha.im=%g beta.im=%g", alpha[1], beta[1]);
    note(__func__, h, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, alpha[0], beta[0], more);
    return status(m, n, k);
}

int cublasDgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const double *alpha,
                              const double *a, int lda, long long sa, const double *b, int ldb,
                              long long sb, const double *beta, double *c, int ldc,
                              long long sc, int count) {
    char more[96];
    snprintf(more, sizeof more, " strides=%lld,%lld,%lld count=%d", sa, sb, sc, count);
    note(__func__, h, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, *alpha, *beta, more);
    return status(m, n, k);
}

int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a,
                 int at, int lda, const void *b, int bt, int ldb, const void *beta, void *c,
                 int ct, int ldc, int compute, int algo) {
    char more[96];
    snprintf(more, sizeof more, " types=%d,%d,%d compute=%d algo=%d", at, bt, ct, compute, algo);
    note(__func__, h, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, *(const float *)alpha,
         *(const float *)beta, more);
    return status(m, n, k);
}

int cublasGemmBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                        const void *const *a, int at, int lda, const void *const *b, int bt,
                        int ldb, const void *beta, void *const *c, int ct, int ldc, int count,
                        int compute, int algo) {
    char more[160];
    snprintf(more, sizeof more, " types=%d,%d,%d count=%d compute=%d algo=%d a1=%lld b1=%lld c1=%lld",
             at, bt, ct, count, compute, algo, off(a[1]), off(b[1]), off(c[1]));
    note(__func__, h, ta, tb, m, n, k, a[0], lda, b[0], ldb, c[0], ldc, *(const double *)alpha,
         *(const double *)beta, more);
    return status(m, n, k);
}
