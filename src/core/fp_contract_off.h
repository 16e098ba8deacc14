// Include FIRST in a TU whose floating-point arithmetic must be exactly the written multiplies and adds, each
// rounded on its own: turns off the compiler's contraction of a * b + c into a fused multiply-add for the rest
// of the TU (GCC: it fuses by default on ARM64 even in ISO C++ mode, and in any TU built with -mfma; clang
// likewise where FMA exists). The scalar references and the SIMD forms that promise their bits (the Gated
// DeltaNet kernels, quant/'s reference quantizers) all include it, so both sides round the same way on every
// target.
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif
