// feed probe: which part of the 8x24 k step costs? all L1-resident.
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define KC 128
double A[8*KC] __attribute__((aligned(64)));
double B[24*KC] __attribute__((aligned(64)));
#define FMAS(BC) \
 "vfmadd231pd %%zmm0," BC ",%%zmm8\n vfmadd231pd %%zmm1," BC ",%%zmm9\n vfmadd231pd %%zmm2," BC ",%%zmm10\n"
#define ACC3(r0,r1,r2,BC) "vfmadd231pd %%zmm0," BC ",%%zmm" #r0 "\n vfmadd231pd %%zmm1," BC ",%%zmm" #r1 "\n vfmadd231pd %%zmm2," BC ",%%zmm" #r2 "\n"
#define BODY24(B0,B1,B2,B3,B4,B5,B6,B7) \
  ACC3(8,9,10,B0) ACC3(11,12,13,B1) ACC3(14,15,16,B2) ACC3(17,18,19,B3) \
  ACC3(20,21,22,B4) ACC3(23,24,25,B5) ACC3(26,27,28,B6) ACC3(29,30,31,B7)
// variant 0: full feed: 3 B loads, 8 broadcast loads (each into zmm3..zmm7 rotating)
static double run(int v, long calls){
  double t=now();
  for(long c=0;c<calls;c++){
    const double* a=A; const double* b=B; long n=KC;
    switch(v){
    case 0: __asm__ volatile(
      "1:\n vmovapd (%[b]),%%zmm0\n vmovapd 64(%[b]),%%zmm1\n vmovapd 128(%[b]),%%zmm2\n"
      "vbroadcastsd (%[a]),%%zmm3\n" ACC3(8,9,10,"%%zmm3")
      "vbroadcastsd 8(%[a]),%%zmm4\n" ACC3(11,12,13,"%%zmm4")
      "vbroadcastsd 16(%[a]),%%zmm5\n" ACC3(14,15,16,"%%zmm5")
      "vbroadcastsd 24(%[a]),%%zmm6\n" ACC3(17,18,19,"%%zmm6")
      "vbroadcastsd 32(%[a]),%%zmm3\n" ACC3(20,21,22,"%%zmm3")
      "vbroadcastsd 40(%[a]),%%zmm4\n" ACC3(23,24,25,"%%zmm4")
      "vbroadcastsd 48(%[a]),%%zmm5\n" ACC3(26,27,28,"%%zmm5")
      "vbroadcastsd 56(%[a]),%%zmm6\n" ACC3(29,30,31,"%%zmm6")
      "add $64,%[a]\n add $192,%[b]\n dec %[n]\n jnz 1b\n"
      : [a]"+r"(a),[b]"+r"(b),[n]"+r"(n) :: "memory","zmm0","zmm1","zmm2","zmm3","zmm4","zmm5","zmm6","zmm7","zmm8","zmm9","zmm10","zmm11","zmm12","zmm13","zmm14","zmm15","zmm16","zmm17","zmm18","zmm19","zmm20","zmm21","zmm22","zmm23","zmm24","zmm25","zmm26","zmm27","zmm28","zmm29","zmm30","zmm31"); break;
    case 1: // no A loads: 3 B loads + 24 FMAs with fixed broadcast regs
      __asm__ volatile(
      "1:\n vmovapd (%[b]),%%zmm0\n vmovapd 64(%[b]),%%zmm1\n vmovapd 128(%[b]),%%zmm2\n"
      BODY24("%%zmm3","%%zmm4","%%zmm5","%%zmm6","%%zmm7","%%zmm3","%%zmm4","%%zmm5")
      "add $64,%[a]\n add $192,%[b]\n dec %[n]\n jnz 1b\n"
      : [a]"+r"(a),[b]"+r"(b),[n]"+r"(n) :: "memory","zmm0","zmm1","zmm2","zmm3","zmm4","zmm5","zmm6","zmm7","zmm8","zmm9","zmm10","zmm11","zmm12","zmm13","zmm14","zmm15","zmm16","zmm17","zmm18","zmm19","zmm20","zmm21","zmm22","zmm23","zmm24","zmm25","zmm26","zmm27","zmm28","zmm29","zmm30","zmm31"); break;
    case 2: // no loads at all
      __asm__ volatile(
      "1:\n"
      BODY24("%%zmm3","%%zmm4","%%zmm5","%%zmm6","%%zmm7","%%zmm3","%%zmm4","%%zmm5")
      "add $64,%[a]\n add $192,%[b]\n dec %[n]\n jnz 1b\n"
      : [a]"+r"(a),[b]"+r"(b),[n]"+r"(n) :: "memory","zmm0","zmm1","zmm2","zmm3","zmm4","zmm5","zmm6","zmm7","zmm8","zmm9","zmm10","zmm11","zmm12","zmm13","zmm14","zmm15","zmm16","zmm17","zmm18","zmm19","zmm20","zmm21","zmm22","zmm23","zmm24","zmm25","zmm26","zmm27","zmm28","zmm29","zmm30","zmm31"); break;
    case 3: // 8 broadcast loads, no B loads (B regs fixed)
      __asm__ volatile(
      "1:\n"
      "vbroadcastsd (%[a]),%%zmm3\n" ACC3(8,9,10,"%%zmm3")
      "vbroadcastsd 8(%[a]),%%zmm4\n" ACC3(11,12,13,"%%zmm4")
      "vbroadcastsd 16(%[a]),%%zmm5\n" ACC3(14,15,16,"%%zmm5")
      "vbroadcastsd 24(%[a]),%%zmm6\n" ACC3(17,18,19,"%%zmm6")
      "vbroadcastsd 32(%[a]),%%zmm3\n" ACC3(20,21,22,"%%zmm3")
      "vbroadcastsd 40(%[a]),%%zmm4\n" ACC3(23,24,25,"%%zmm4")
      "vbroadcastsd 48(%[a]),%%zmm5\n" ACC3(26,27,28,"%%zmm5")
      "vbroadcastsd 56(%[a]),%%zmm6\n" ACC3(29,30,31,"%%zmm6")
      "add $64,%[a]\n add $192,%[b]\n dec %[n]\n jnz 1b\n"
      : [a]"+r"(a),[b]"+r"(b),[n]"+r"(n) :: "memory","zmm0","zmm1","zmm2","zmm3","zmm4","zmm5","zmm6","zmm7","zmm8","zmm9","zmm10","zmm11","zmm12","zmm13","zmm14","zmm15","zmm16","zmm17","zmm18","zmm19","zmm20","zmm21","zmm22","zmm23","zmm24","zmm25","zmm26","zmm27","zmm28","zmm29","zmm30","zmm31"); break;
    case 4: // full feed but A broadcasts from 4 x vbroadcastf64x2? no: 2 x 256-bit loads + in-register permutes (p5)
      __asm__ volatile(
      "1:\n vmovapd (%[b]),%%zmm0\n vmovapd 64(%[b]),%%zmm1\n vmovapd 128(%[b]),%%zmm2\n"
      "vbroadcastsd (%[a]),%%zmm3\n vbroadcastsd 8(%[a]),%%zmm4\n vbroadcastsd 16(%[a]),%%zmm5\n vbroadcastsd 24(%[a]),%%zmm6\n"
      ACC3(8,9,10,"%%zmm3") ACC3(11,12,13,"%%zmm4") ACC3(14,15,16,"%%zmm5") ACC3(17,18,19,"%%zmm6")
      "vbroadcastsd 32(%[a]),%%zmm3\n vbroadcastsd 40(%[a]),%%zmm4\n vbroadcastsd 48(%[a]),%%zmm5\n vbroadcastsd 56(%[a]),%%zmm6\n"
      ACC3(20,21,22,"%%zmm3") ACC3(23,24,25,"%%zmm4") ACC3(26,27,28,"%%zmm5") ACC3(29,30,31,"%%zmm6")
      "add $64,%[a]\n add $192,%[b]\n dec %[n]\n jnz 1b\n"
      : [a]"+r"(a),[b]"+r"(b),[n]"+r"(n) :: "memory","zmm0","zmm1","zmm2","zmm3","zmm4","zmm5","zmm6","zmm7","zmm8","zmm9","zmm10","zmm11","zmm12","zmm13","zmm14","zmm15","zmm16","zmm17","zmm18","zmm19","zmm20","zmm21","zmm22","zmm23","zmm24","zmm25","zmm26","zmm27","zmm28","zmm29","zmm30","zmm31"); break;
    }
  }
  t=now()-t; return calls*8.0*24*KC*2/t/1e9;
}
int cmp(const void*x,const void*y){double a=*(double*)x,b=*(double*)y;return a<b?-1:a>b;}
int main(int argc,char**argv){
  for(int i=0;i<8*KC;i++)A[i]=1e-9; for(int i=0;i<24*KC;i++)B[i]=1e-9;
  int R=atoi(argv[1]); int NV=5; double rs[5][101];
  for(int r=0;r<R;r++) for(int v=0;v<NV;v++) rs[v][r]=run(v,200000);
  const char*nm[]={"full","noA","noload","noB","grouped"};
  for(int v=0;v<NV;v++){qsort(rs[v],R,sizeof(double),cmp); printf("%-8s median %.1f max %.1f\n",nm[v],rs[v][R/2],rs[v][R-1]);}
}
