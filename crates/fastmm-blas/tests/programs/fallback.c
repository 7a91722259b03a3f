/* A stand-in BLAS for the forwarding test: a few routines of the
 * reference BLAS's and CBLAS's signatures (integer and pointer
 * arguments, a double by value, float and complex returns), each
 * computing its answer and counting its calls, so that the test sees
 * that calls through libfastmm_blas arrive here with every argument
 * intact. Built as a shared library and named by FASTMM_BLAS_FALLBACK. */
#include <complex.h>

int fallback_calls = 0;

double ddot_(const int *n, const double *x, const int *incx, const double *y, const int *incy) {
    double s = 0;
    for (int i = 0; i < *n; i++) s += x[i * *incx] * y[i * *incy];
    fallback_calls++;
    return s;
}

float sdot_(const int *n, const float *x, const int *incx, const float *y, const int *incy) {
    float s = 0;
    for (int i = 0; i < *n; i++) s += x[i * *incx] * y[i * *incy];
    fallback_calls++;
    return s;
}

double complex zdotc_(const int *n, const double complex *x, const int *incx,
                      const double complex *y, const int *incy) {
    double complex s = 0;
    for (int i = 0; i < *n; i++) s += conj(x[i * *incx]) * y[i * *incy];
    fallback_calls++;
    return s;
}

void cblas_daxpy(const int n, const double alpha, const double *x, const int incx,
                 double *y, const int incy) {
    for (int i = 0; i < n; i++) y[i * incy] += alpha * x[i * incx];
    fallback_calls++;
}

float cblas_sdsdot(const int n, const float alpha, const float *x, const int incx,
                   const float *y, const int incy) {
    double s = alpha;
    for (int i = 0; i < n; i++) s += (double)x[i * incx] * y[i * incy];
    fallback_calls++;
    return (float)s;
}
