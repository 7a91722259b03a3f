#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#ifndef KC
#define KC 128
#endif
double A[12*KC] __attribute__((aligned(64)));
double B[48*KC] __attribute__((aligned(64)));
