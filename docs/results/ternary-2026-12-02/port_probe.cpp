#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <ctime>
static double now(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
template<int K> __attribute__((noinline)) double run(long n){
  __m512i a[8],b=_mm512_set1_epi8(3),c=_mm512_set1_epi8(5);
  for(int i=0;i<8;i++)a[i]=_mm512_set1_epi8(i);
  double t0=now();
  for(long i=0;i<n;i++){
    #pragma GCC unroll 8
    for(int j=0;j<8;j++){
      if constexpr(K==0) a[j]=_mm512_permutex2var_epi8(b,a[j],c);
      if constexpr(K==1) a[j]=_mm512_dpbusd_epi32(a[j],b,c);
      if constexpr(K==2) a[j]=_mm512_add_epi8(a[j],b);
      if constexpr(K==3) { if(j&1) a[j]=_mm512_permutex2var_epi8(b,a[j],c); else a[j]=_mm512_dpbusd_epi32(a[j],b,c);}
      if constexpr(K==4) { if(j&1) a[j]=_mm512_add_epi8(a[j],b); else a[j]=_mm512_dpbusd_epi32(a[j],b,c);}
      if constexpr(K==5) { if(j&1) a[j]=_mm512_add_epi8(a[j],b); else a[j]=_mm512_permutex2var_epi8(b,a[j],c);}
      if constexpr(K==6) a[j]=_mm512_permutexvar_epi8(a[j],c);
    }
    __asm__ volatile(""::"v"(a[0]),"v"(a[1]),"v"(a[2]),"v"(a[3]),"v"(a[4]),"v"(a[5]),"v"(a[6]),"v"(a[7]));
  }
  double t=now()-t0;
  return t/(n*8)*1e9;
}
int main(){long n=20000000; const char* nm[]={"vpermi2b","vpdpbusd","vpaddb","perm+dpbusd","add+dpbusd","add+perm","vpermb"};
 double r[7]={run<0>(n),run<1>(n),run<2>(n),run<3>(n),run<4>(n),run<5>(n),run<6>(n)};
 for(int k=0;k<7;k++)printf("%s: %.3f ns/op\n",nm[k],r[k]);
 // clock estimate: dependent add chain
 long x=1; double t0=now(); for(long i=0;i<400000000;i++){ __asm__ volatile("add $1, %0":"+r"(x)); } double t=now()-t0; printf("dep add: %.3f ns => %.2f GHz\n", t/4e8*1e9, 4e8/t/1e9);
}
