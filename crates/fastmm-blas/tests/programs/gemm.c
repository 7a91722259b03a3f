/* A C program written for any BLAS: CBLAS and the Fortran symbol, checked
 * against its own loops. Exit 0 when every product agrees. */
#include <math.h>
#include <stdio.h>

void cblas_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb, double beta,
                 double *c, int ldc);
void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b,
            const int *ldb, const double *beta, double *c, const int *ldc);

enum { M = 37, N = 29, K = 41 };

int main(void) {
    static double a[M * K], b[K * N], c[M * N], want[M * N];
    for (int i = 0; i < M * K; i++) a[i] = (double)((i * 7) % 13) - 6.0;
    for (int i = 0; i < K * N; i++) b[i] = (double)((i * 5) % 11) - 5.0;
    int bad = 0;
    /* Row-major C = A B through CBLAS, C full of NaN and beta = 0. */
    for (int i = 0; i < M * N; i++) c[i] = NAN;
    cblas_dgemm(101, 111, 111, M, N, K, 1.0, a, K, b, N, 0.0, c, N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++) s += a[i * K + p] * b[p * N + j];
            if (c[i * N + j] != s) bad++;
        }
    /* Column-major C = 2 A^T B - C through the Fortran symbol, A stored K x M. */
    for (int i = 0; i < M * N; i++) c[i] = want[i] = (double)(i % 3);
    int m = M, n = N, k = K, lda = K, ldb = K, ldc = M;
    double alpha = 2.0, beta = -1.0;
    dgemm_("T", "N", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            double s = 0;
            for (int p = 0; p < K; p++) s += a[i * K + p] * b[j * K + p];
            if (c[i + j * M] != 2.0 * s - want[i + j * M]) bad++;
        }
    printf("%s: %d wrong elements\n", bad ? "WRONG" : "ok", bad);
    return bad != 0;
}
