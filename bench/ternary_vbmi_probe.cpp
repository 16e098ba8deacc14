// Throughput probe (one core, thread CPU time): masked vpermi2b zmm against vpaddb zmm and vpdpbusd zmm,
// 8 independent chains each. Evidence for docs/TERNARY.md (VBMI lookups). Build:
//   g++ -O2 -mavx512f -mavx512bw -mavx512vbmi -mavx512vnni bench/ternary_vbmi_probe.cpp -o /tmp/probe
#include <immintrin.h>
#include <cstdio>
#include <ctime>
static double now(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(){
  __m512i t0=_mm512_set1_epi8(1),t1=_mm512_set1_epi8(2);
  __m512i x[8]; for(int i=0;i<8;i++) x[i]=_mm512_set1_epi8(i*17);
  __mmask64 k=0x5555555555555555ull;
  const long N=20000000;
  // independent vpermi2b (masked mask2 form), 8 chains
  double a=now();
  for(long i=0;i<N;i++){
#pragma GCC unroll 8
    for(int j=0;j<8;j++){ x[j]=_mm512_mask2_permutex2var_epi8(t0,x[j],k,t1); }
    asm volatile("" : "+v"(x[0]),"+v"(x[1]),"+v"(x[2]),"+v"(x[3]),"+v"(x[4]),"+v"(x[5]),"+v"(x[6]),"+v"(x[7]));
  }
  double b=now();
  // independent vpaddb as reference (1/cycle-ish on p05)
  for(long i=0;i<N;i++){
#pragma GCC unroll 8
    for(int j=0;j<8;j++){ x[j]=_mm512_add_epi8(x[j],t0); x[j]=_mm512_add_epi8(x[j],t1);}
    asm volatile("" : "+v"(x[0]),"+v"(x[1]),"+v"(x[2]),"+v"(x[3]),"+v"(x[4]),"+v"(x[5]),"+v"(x[6]),"+v"(x[7]));
  }
  double c=now();
  __m512i acc[8]; for(int j=0;j<8;j++) acc[j]=x[j];
  for(long i=0;i<N;i++){
#pragma GCC unroll 8
    for(int j=0;j<8;j++){ acc[j]=_mm512_dpbusd_epi32(acc[j],t0,t1);}
    asm volatile("" : "+v"(acc[0]),"+v"(acc[1]),"+v"(acc[2]),"+v"(acc[3]),"+v"(acc[4]),"+v"(acc[5]),"+v"(acc[6]),"+v"(acc[7]));
  }
  double d=now();
  long s=0; for(int j=0;j<8;j++) s+=_mm512_reduce_add_epi32(x[j])+_mm512_reduce_add_epi32(acc[j]);
  printf("ns per vpermi2b %.3f  per vpaddb %.3f  per vpdpbusd zmm %.3f (%ld)\n",(b-a)/N/8*1e9,(c-b)/N/16*1e9,(d-c)/N/8*1e9,s);
}
