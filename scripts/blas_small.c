/* A C loop over dgemm_ (or sgemm_, zgemm_, cgemm_) on n×n matrices, the best of 7 runs of
 * `reps` calls, in ns per call: the cost of the BLAS call itself at small
 * sizes. Built and run by scripts/blas_small.sh against a BLAS and against
 * libfastmm_blas preloaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void dgemm_(const char *, const char *, const int *, const int *, const int *, const double *,
            const double *, const int *, const double *, const int *, const double *, double *,
            const int *);
void sgemm_(const char *, const char *, const int *, const int *, const int *, const float *,
            const float *, const int *, const float *, const int *, const float *, float *,
            const int *);
/* Complex operands as interleaved (re, im) pairs of doubles. */
void zgemm_(const char *, const char *, const int *, const int *, const int *, const double *,
            const double *, const int *, const double *, const int *, const double *, double *,
            const int *);
/* Single-precision complex operands as interleaved (re, im) floats. */
void cgemm_(const char *, const char *, const int *, const int *, const int *, const float *,
            const float *, const int *, const float *, const int *, const float *, float *,
            const int *);

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s N REPS [d|s|z|c]\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]), reps = atoi(argv[2]);
    char type = argc > 3 ? argv[3][0] : 'd';
    int complex = type == 'z' || type == 'c';
    int len = n * n * (complex ? 2 : 1);
    double *a = malloc(sizeof(double) * len), *b = malloc(sizeof(double) * len),
           *c = malloc(sizeof(double) * len);
    float *af = malloc(sizeof(float) * len), *bf = malloc(sizeof(float) * len),
          *cf = malloc(sizeof(float) * len);
    for (int i = 0; i < len; i++) {
        af[i] = a[i] = i % 7 - 3;
        bf[i] = b[i] = i % 5 - 2;
        cf[i] = c[i] = 0;
    }
    double one[2] = {1, 0}, zero[2] = {0, 0}, best = 1e30;
    float onef[2] = {1, 0}, zerof[2] = {0, 0};
    for (int r = 0; r < 7; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (type == 'c')
            for (int i = 0; i < reps; i++)
                cgemm_("N", "N", &n, &n, &n, onef, af, &n, bf, &n, zerof, cf, &n);
        else if (type == 's')
            for (int i = 0; i < reps; i++)
                sgemm_("N", "N", &n, &n, &n, onef, af, &n, bf, &n, zerof, cf, &n);
        else if (complex)
            for (int i = 0; i < reps; i++)
                zgemm_("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n);
        else
            for (int i = 0; i < reps; i++)
                dgemm_("N", "N", &n, &n, &n, one, a, &n, b, &n, zero, c, &n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / reps;
        if (ns < best)
            best = ns;
    }
    printf("%.1f\n", best);
    return 0;
}
