// The one run-time decision of which SIMD kernel set (ISA) every CPU kernel table uses.
//
// detected_isa() is the widest set this CPU and this build support. active_isa() is what the kernel
// tables dispatch on: detected_isa(), unless the environment variable POLYKV_ISA (read once, on the
// first call) or force_isa() (tests, benchmarks) chose another supported one. Every table
// (matmul, packed weights, attention tiles, KV row decoders, turbo codecs) asks active_isa() at the
// call, so forcing takes effect for the next kernel call; tables fall back per type to the widest
// kernel at or below the active ISA (x86: avx512 > avx2 > scalar; neon > scalar).
//
// Rules: a forced ISA must be supported (isa_supported), otherwise force_isa and active_isa (for a
// bad POLYKV_ISA) throw polykv::Error with the reason; forcing is process-wide, so a test that forces
// must restore (IsaScope) and must not race kernel calls of other threads while switching.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

namespace polykv {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2, Neon = 3 };

const char* isa_name(Isa isa);                      // "scalar", "avx2", "avx512", "neon"
std::optional<Isa> parse_isa(std::string_view name);  // inverse of isa_name

// x86 tiers: true for Avx2 and Avx512 (the AVX2 kernels may run), resp. Avx512 only.
inline bool isa_has_avx2(Isa isa) { return isa == Isa::Avx2 || isa == Isa::Avx512; }
inline bool isa_has_avx512(Isa isa) { return isa == Isa::Avx512; }

// True when this CPU can run the kernel set and this build has it (Scalar: always).
bool isa_supported(Isa isa);
// Why `isa` cannot run here ("" when it can), e.g. "this CPU lacks AVX-512 (F/BW/VL/DQ/VNNI)".
const char* isa_unsupported_reason(Isa isa);
std::vector<Isa> supported_isas();  // scalar first, the widest last

Isa detected_isa();
Isa active_isa();  // throws Error if POLYKV_ISA names an unknown or unsupported set
bool isa_forced();  // POLYKV_ISA or force_isa() is in effect

void force_isa(Isa isa);  // throws Error if !isa_supported(isa)
void clear_forced_isa();  // back to POLYKV_ISA if set, else detected_isa()

// Forces an ISA for a scope (tests): restores the previous choice on destruction.
class IsaScope {
 public:
  explicit IsaScope(Isa isa);
  ~IsaScope();
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  int prev_;
};

}  // namespace polykv
