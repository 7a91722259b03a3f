// Session 17 probe (issue 3): the f64 8x24 k loop of `packed` against a
// loop of independent FMAs and OpenBLAS's SkylakeX pattern (four vmovddup
// loads, six 128-bit pair broadcasts, 24 FMAs), all operands L1-resident.
//   gcc -O2 -mavx512f -mavx512dq -mfma -DKC=128 -o probe session17-kernel-probe.c
//   taskset -c 1 ./probe 40      # 40 interleaved rounds; medians and ratios
// (The `embed` function, FMAs with {1to8} memory broadcasts, is not called:
// 0.575x the 8x24 loop in a first run.)
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#ifndef KC
#define KC 192
#endif
double A[16*KC*4] __attribute__((aligned(64)));
double B[24*KC*2] __attribute__((aligned(64)));
double C[16*24*2] __attribute__((aligned(64)));
__attribute__((noinline)) void pure(long iters, double* out){
  __m512d acc[24]; for(int i=0;i<24;i++) acc[i]=_mm512_set1_pd(i);
  __m512d x=_mm512_set1_pd(1.0000001), y=_mm512_set1_pd(0.9999999);
  for(long it=0;it<iters;it++){
    #pragma GCC unroll 24
    for(int i=0;i<24;i++) acc[i]=_mm512_fmadd_pd(acc[i],x,y);
  }
  __m512d s=acc[0]; for(int i=1;i<24;i++) s=_mm512_add_pd(s,acc[i]); _mm512_storeu_pd(out,s);
}
__attribute__((noinline)) void ours(long calls, const double* a, const double* b, double* c){
  for(long call=0;call<calls;call++){
  __m512d acc[8][3]; for(int i=0;i<8;i++) for(int j=0;j<3;j++) acc[i][j]=_mm512_setzero_pd();
  for(int p=0;p<KC;p++){
    __m512d b0=_mm512_load_pd(b+p*24), b1=_mm512_load_pd(b+p*24+8), b2=_mm512_load_pd(b+p*24+16);
    #pragma GCC unroll 8
    for(int i=0;i<8;i++){ __m512d ai=_mm512_set1_pd(a[p*8+i]);
      acc[i][0]=_mm512_fmadd_pd(ai,b0,acc[i][0]); acc[i][1]=_mm512_fmadd_pd(ai,b1,acc[i][1]); acc[i][2]=_mm512_fmadd_pd(ai,b2,acc[i][2]); }
  }
  for(int i=0;i<8;i++) for(int j=0;j<3;j++) _mm512_store_pd(c+i*24+j*8, _mm512_add_pd(_mm512_load_pd(c+i*24+j*8),acc[i][j]));
  }
}
// same tile, FMAs with embedded {1to8} broadcast memory operands (no separate broadcasts)
__attribute__((noinline)) void embed(long calls, const double* a, const double* b, double* c){
  for(long call=0;call<calls;call++){
  __m512d a00=_mm512_setzero_pd(),a01=a00,a02=a00,a10=a00,a11=a00,a12=a00,a20=a00,a21=a00,a22=a00,a30=a00,a31=a00,a32=a00,
          a40=a00,a41=a00,a42=a00,a50=a00,a51=a00,a52=a00,a60=a00,a61=a00,a62=a00,a70=a00,a71=a00,a72=a00;
  const double* ap=a; const double* bp=b;
  for(int p=0;p<KC;p++){
    __m512d b0=_mm512_load_pd(bp), b1=_mm512_load_pd(bp+8), b2=_mm512_load_pd(bp+16);
    __asm__ volatile(
      "vfmadd231pd 0(%[a])%{1to8%}, %[b0], %[a00]\n"
      "vfmadd231pd 0(%[a])%{1to8%}, %[b1], %[a01]\n"
      "vfmadd231pd 0(%[a])%{1to8%}, %[b2], %[a02]\n"
      "vfmadd231pd 8(%[a])%{1to8%}, %[b0], %[a10]\n"
      "vfmadd231pd 8(%[a])%{1to8%}, %[b1], %[a11]\n"
      "vfmadd231pd 8(%[a])%{1to8%}, %[b2], %[a12]\n"
      "vfmadd231pd 16(%[a])%{1to8%}, %[b0], %[a20]\n"
      "vfmadd231pd 16(%[a])%{1to8%}, %[b1], %[a21]\n"
      "vfmadd231pd 16(%[a])%{1to8%}, %[b2], %[a22]\n"
      "vfmadd231pd 24(%[a])%{1to8%}, %[b0], %[a30]\n"
      "vfmadd231pd 24(%[a])%{1to8%}, %[b1], %[a31]\n"
      "vfmadd231pd 24(%[a])%{1to8%}, %[b2], %[a32]\n"
      : [a00]"+v"(a00),[a01]"+v"(a01),[a02]"+v"(a02),[a10]"+v"(a10),[a11]"+v"(a11),[a12]"+v"(a12),[a20]"+v"(a20),[a21]"+v"(a21),[a22]"+v"(a22),[a30]"+v"(a30),[a31]"+v"(a31),[a32]"+v"(a32)
      : [a]"r"(ap),[b0]"v"(b0),[b1]"v"(b1),[b2]"v"(b2) : "memory");
    __asm__ volatile(
      "vfmadd231pd 32(%[a])%{1to8%}, %[b0], %[a40]\n"
      "vfmadd231pd 32(%[a])%{1to8%}, %[b1], %[a41]\n"
      "vfmadd231pd 32(%[a])%{1to8%}, %[b2], %[a42]\n"
      "vfmadd231pd 40(%[a])%{1to8%}, %[b0], %[a50]\n"
      "vfmadd231pd 40(%[a])%{1to8%}, %[b1], %[a51]\n"
      "vfmadd231pd 40(%[a])%{1to8%}, %[b2], %[a52]\n"
      "vfmadd231pd 48(%[a])%{1to8%}, %[b0], %[a60]\n"
      "vfmadd231pd 48(%[a])%{1to8%}, %[b1], %[a61]\n"
      "vfmadd231pd 48(%[a])%{1to8%}, %[b2], %[a62]\n"
      "vfmadd231pd 56(%[a])%{1to8%}, %[b0], %[a70]\n"
      "vfmadd231pd 56(%[a])%{1to8%}, %[b1], %[a71]\n"
      "vfmadd231pd 56(%[a])%{1to8%}, %[b2], %[a72]\n"
      : [a40]"+v"(a40),[a41]"+v"(a41),[a42]"+v"(a42),[a50]"+v"(a50),[a51]"+v"(a51),[a52]"+v"(a52),[a60]"+v"(a60),[a61]"+v"(a61),[a62]"+v"(a62),[a70]"+v"(a70),[a71]"+v"(a71),[a72]"+v"(a72)
      : [a]"r"(ap),[b0]"v"(b0),[b1]"v"(b1),[b2]"v"(b2) : "memory");
    ap+=8; bp+=24;
  }
  _mm512_store_pd(c+0, _mm512_add_pd(_mm512_load_pd(c+0), a00));
  _mm512_store_pd(c+8, _mm512_add_pd(_mm512_load_pd(c+8), a01));
  _mm512_store_pd(c+16, _mm512_add_pd(_mm512_load_pd(c+16), a02));
  _mm512_store_pd(c+24, _mm512_add_pd(_mm512_load_pd(c+24), a10));
  _mm512_store_pd(c+32, _mm512_add_pd(_mm512_load_pd(c+32), a11));
  _mm512_store_pd(c+40, _mm512_add_pd(_mm512_load_pd(c+40), a12));
  _mm512_store_pd(c+48, _mm512_add_pd(_mm512_load_pd(c+48), a20));
  _mm512_store_pd(c+56, _mm512_add_pd(_mm512_load_pd(c+56), a21));
  _mm512_store_pd(c+64, _mm512_add_pd(_mm512_load_pd(c+64), a22));
  _mm512_store_pd(c+72, _mm512_add_pd(_mm512_load_pd(c+72), a30));
  _mm512_store_pd(c+80, _mm512_add_pd(_mm512_load_pd(c+80), a31));
  _mm512_store_pd(c+88, _mm512_add_pd(_mm512_load_pd(c+88), a32));
  _mm512_store_pd(c+96, _mm512_add_pd(_mm512_load_pd(c+96), a40));
  _mm512_store_pd(c+104, _mm512_add_pd(_mm512_load_pd(c+104), a41));
  _mm512_store_pd(c+112, _mm512_add_pd(_mm512_load_pd(c+112), a42));
  _mm512_store_pd(c+120, _mm512_add_pd(_mm512_load_pd(c+120), a50));
  _mm512_store_pd(c+128, _mm512_add_pd(_mm512_load_pd(c+128), a51));
  _mm512_store_pd(c+136, _mm512_add_pd(_mm512_load_pd(c+136), a52));
  _mm512_store_pd(c+144, _mm512_add_pd(_mm512_load_pd(c+144), a60));
  _mm512_store_pd(c+152, _mm512_add_pd(_mm512_load_pd(c+152), a61));
  _mm512_store_pd(c+160, _mm512_add_pd(_mm512_load_pd(c+160), a62));
  _mm512_store_pd(c+168, _mm512_add_pd(_mm512_load_pd(c+168), a70));
  _mm512_store_pd(c+176, _mm512_add_pd(_mm512_load_pd(c+176), a71));
  _mm512_store_pd(c+184, _mm512_add_pd(_mm512_load_pd(c+184), a72));
  }
}


// OpenBLAS-like: per k, 16 "rows" from one stream via 4 movddup loads (pairs duplicated),
// 6 streams of 2 "columns" broadcast as 128-bit pairs; 24 FMAs.
__attribute__((noinline)) void obl(long calls, const double* a, const double* b, double* c){
  for(long call=0;call<calls;call++){
  __m512d acc[6][4]; for(int i=0;i<6;i++) for(int j=0;j<4;j++) acc[i][j]=_mm512_setzero_pd();
  const double* ap=a; const double* bp=b;
  for(int p=0;p<KC;p++){
    __m512d x0=_mm512_movedup_pd(_mm512_loadu_pd(ap)), x1=_mm512_movedup_pd(_mm512_loadu_pd(ap+1));
    __m512d x2=_mm512_movedup_pd(_mm512_loadu_pd(ap+8)), x3=_mm512_movedup_pd(_mm512_loadu_pd(ap+9));
    #pragma GCC unroll 6
    for(int j=0;j<6;j++){ __m512d y=_mm512_broadcast_f64x2(_mm_loadu_pd(bp+j*2*KC));
      acc[j][0]=_mm512_fmadd_pd(x0,y,acc[j][0]); acc[j][1]=_mm512_fmadd_pd(x1,y,acc[j][1]);
      acc[j][2]=_mm512_fmadd_pd(x2,y,acc[j][2]); acc[j][3]=_mm512_fmadd_pd(x3,y,acc[j][3]); }
    ap+=16; bp+=2;
  }
  for(int i=0;i<6;i++) for(int j=0;j<4;j++) _mm512_store_pd(c+i*32+j*8, _mm512_add_pd(_mm512_load_pd(c+i*32+j*8),acc[i][j]));
  }
}
int main(int argc,char**argv){
  for(int i=0;i<16*KC*4;i++)A[i]=1e-3*(i%7); for(int i=0;i<24*KC*2;i++)B[i]=1e-3*(i%5);
  double out[8]; int R=atoi(argv[1]);
  double rs[4][64];
  for(int r=0;r<R;r++){
    long it=4000000; double t=now(); pure(it,out); t=now()-t; rs[0][r]=it*24*16/t/1e9;
    long calls=60000; t=now(); ours(calls,A,B,C); t=now()-t; rs[1][r]=calls*8*24*KC*2.0/t/1e9;
    t=now(); obl(calls,A,B,C); t=now()-t; rs[2][r]=calls*8*24*KC*2.0/t/1e9;
  }
  const char* nm[3]={"pure","ours","obl"};
  for(int v=0;v<3;v++){ double x[64]; memcpy(x,rs[v],sizeof(double)*R);
    for(int i=0;i<R;i++)for(int j=i+1;j<R;j++) if(x[j]<x[i]){double tt=x[i];x[i]=x[j];x[j]=tt;}
    printf("%-6s median %.1f max %.1f\n", nm[v], x[R/2], x[R-1]); }
  double r1[64],r2[64];
  for(int i=0;i<R;i++){r1[i]=rs[1][i]/rs[0][i]; r2[i]=rs[2][i]/rs[1][i];}
  for(int i=0;i<R;i++)for(int j=i+1;j<R;j++){ if(r1[j]<r1[i]){double tt=r1[i];r1[i]=r1[j];r1[j]=tt;} if(r2[j]<r2[i]){double tt=r2[i];r2[i]=r2[j];r2[j]=tt;}}
  printf("ours/pure median %.3f ; obl/ours median %.3f\n", r1[R/2], r2[R/2]);
  return (int)out[0]&1;
}
