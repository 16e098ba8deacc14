#include "core/isa.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/cpu_features.h"
#include "core/error.h"

namespace polykv {
namespace {

constexpr bool kX86 =
#if defined(__x86_64__) || defined(__i386__)
    true;
#else
    false;
#endif
constexpr bool kArm64 =
#if defined(__aarch64__)
    true;
#else
    false;
#endif

// -1: not forced by force_isa(); else int(Isa).
std::atomic<int> g_forced{-1};

// POLYKV_ISA, parsed and checked once. The error text is kept so that every call reports it.
struct EnvChoice {
  int isa = -1;       // -1: unset
  std::string error;  // non-empty: POLYKV_ISA is set but unusable
};

const EnvChoice& env_choice() {
  static const EnvChoice c = [] {
    EnvChoice e;
    const char* v = std::getenv("POLYKV_ISA");
    if (!v || !*v) return e;
    const std::optional<Isa> isa = parse_isa(v);
    if (!isa) {
      e.error = std::string("POLYKV_ISA=") + v + " is not one of scalar, avx2, avx512, neon";
    } else if (!isa_supported(*isa)) {
      e.error = std::string("POLYKV_ISA=") + v + ": " + isa_unsupported_reason(*isa);
    } else {
      e.isa = int(*isa);
    }
    return e;
  }();
  return c;
}

Isa detect() {
  for (Isa isa : {Isa::Avx512, Isa::Avx2, Isa::Neon})
    if (isa_supported(isa)) return isa;
  return Isa::Scalar;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Neon: return "neon";
  }
  return "?";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon})
    if (name == isa_name(isa)) return isa;
  return std::nullopt;
}

const char* isa_unsupported_reason(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::Scalar: return "";
    case Isa::Avx2:
      if (!kX86) return "the avx2 kernels are for x86-64 CPUs; this is not one";
      return f.has_avx2_set() ? "" : "this CPU lacks AVX2/FMA/F16C";
    case Isa::Avx512:
      if (!kX86) return "the avx512 kernels are for x86-64 CPUs; this is not one";
      return f.has_avx512_set() ? "" : "this CPU lacks the AVX-512 set polykv needs (F/BW/VL/DQ/VNNI)";
    case Isa::Neon:
      // ASIMD is part of every AArch64 CPU; dotprod is chosen inside the set (cpu_features().asimd_dot).
      return kArm64 ? "" : "the neon kernels are for ARM64 CPUs; this is not one";
  }
  return "unknown ISA";
}

bool isa_supported(Isa isa) { return *isa_unsupported_reason(isa) == '\0'; }

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Scalar, Isa::Neon, Isa::Avx2, Isa::Avx512})
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  if (forced >= 0) return Isa(forced);
  const EnvChoice& e = env_choice();
  check(e.error.empty(), e.error);
  return e.isa >= 0 ? Isa(e.isa) : detected_isa();
}

bool isa_forced() { return g_forced.load() >= 0 || env_choice().isa >= 0; }

void force_isa(Isa isa) {
  check(isa_supported(isa), "cannot force the ", isa_name(isa), " kernels: ", isa_unsupported_reason(isa));
  g_forced.store(int(isa));
}

void clear_forced_isa() { g_forced.store(-1); }

IsaScope::IsaScope(Isa isa) : prev_(g_forced.load()) { force_isa(isa); }
IsaScope::~IsaScope() { g_forced.store(prev_); }

}  // namespace polykv
