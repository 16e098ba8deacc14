// Bounds of the qwen35 hybrid fixture on the CUDA backend (tests/cuda/hybrid_cuda_test.cpp), shared with
// the CPU test that measures what the CUDA backend's rounding alone gives (tests/hybrid_cuda_emulation_test.cpp):
// max |d log-softmax| over the 48 rows. Wrong hybrid features move log-probs by 0.6 to 12 (fixtures
// README, "sensitivity"), so these bounds still separate right from wrong.
#pragma once

namespace polykv::test {

// Against transformers (and the plain CPU backend): the CUDA backend's prefill rounds matmul activations
// to f16 (cuBLAS), and this random fixture turns that 2^-11 relative rounding into 0.069 (row 28, f32
// and f16 KV alike: tests/cuda_rounding_backend.h on the CPU; the H200 measured 0.070, 2026-12-01d).
// Rounding only the GDN in-projection's activations gives 0.039, the FFN's 0.011. The CPU itself is
// 3e-5 (f32 KV) and 5e-4 (f16 KV).
constexpr double kHybridCudaF32Bound = 0.1;
constexpr double kHybridCudaF16Bound = 0.1;
// Against the CPU backend with the CUDA backend's roundings (test::CudaRoundingBackend): what is left is
// summation order (~1e-6 relative) and the few f16 roundings it flips; a wrong op gives 0.1 and more.
constexpr double kHybridCudaVsEmulationBound = 2e-2;

}  // namespace polykv::test
