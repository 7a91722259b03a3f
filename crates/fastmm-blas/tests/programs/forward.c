/* Calls BLAS routines that libfastmm_blas does not compute, linked
 * against libfastmm_blas alone: each must reach the fallback library
 * (FASTMM_BLAS_FALLBACK) with its arguments intact and return its
 * answer, whatever the signature. With an argument "missing", calls a
 * routine the fallback lacks, which must end the process naming it. */
#include <complex.h>
#include <stdio.h>
#include <string.h>

double ddot_(const int *, const double *, const int *, const double *, const int *);
float sdot_(const int *, const float *, const int *, const float *, const int *);
double complex zdotc_(const int *, const double complex *, const int *,
                      const double complex *, const int *);
void cblas_daxpy(int, double, const double *, int, double *, int);
float cblas_sdsdot(int, float, const float *, int, const float *, int);
void dscal_(const int *, const double *, double *, const int *);
size_t fastmm_blas_forwarded(void);

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "missing") == 0) {
        int n = 2, one = 1;
        double a = 2, x[2] = {1, 2};
        dscal_(&n, &a, x, &one);
        printf("dscal_ returned\n");
        return 0;
    }
    int n = 3, one = 1, two = 2;
    double x[6] = {1, -1, 2, -2, 3, -3}, y[3] = {4, 5, 6};
    float xf[3] = {1.5f, 2.5f, -1}, yf[3] = {2, 4, 8};
    double complex xc[2] = {1 + 2 * I, 3 - I}, yc[2] = {2 - I, 1 + I};
    int two_n = 2;
    int bad = 0;
    double d = ddot_(&n, x, &two, y, &one);            /* 4 + 10 + 18 */
    bad |= d != 32.0;
    float f = sdot_(&n, xf, &one, yf, &one);           /* 3 + 10 - 8 */
    bad |= f != 5.0f;
    double complex z = zdotc_(&two_n, xc, &one, yc, &one);
    /* conj(1+2i)(2-i) + conj(3-i)(1+i) = (-5i) + (2+4i) */
    bad |= creal(z) != 2.0 || cimag(z) != -1.0;
    cblas_daxpy(3, 0.5, y, 1, x, 2);                    /* x[0,2,4] += y/2 */
    bad |= x[0] != 3.0 || x[2] != 4.5 || x[4] != 6.0;
    float s = cblas_sdsdot(3, 0.25f, xf, 1, yf, 1);
    bad |= s != 5.25f;
    printf("%s %zu forwarded: %g %g (%g%+gi) %g %g %g %g\n", bad ? "wrong" : "ok",
           fastmm_blas_forwarded(), d, f, creal(z), cimag(z), x[0], x[2], x[4], s);
    return bad;
}
