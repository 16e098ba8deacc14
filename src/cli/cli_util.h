// Shared helpers for the command implementations.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kv/kv_cache.h"
#include "kv/kv_type.h"
#include "model/config.h"

namespace polykv {
class Backend;
class Model;
}

namespace polykv::cli {

// Prints a usage error the one way every command does, on stderr, and returns 2:
//   polykv VERB: error: WHAT
//   run `polykv VERB --help` for usage
// command is the full command ("polykv run", "polykv eval ppl").
int usage_error(const std::string& command, const std::string& what);

// Parses argv with app (whose name is the full command, "polykv run"). Returns an exit code to return
// at once (0 after --help, 2 after a usage error, printed by usage_error), or nullopt when the command
// should run. llama.cpp-style short options with several letters (-ctk, -ctv) are spelled out for CLI11.
std::optional<int> parse_args(CLI::App& app, int argc, char** argv);

// The project's default KV cache types (DESIGN.md §4): keys q8_0 (softmax amplifies their error),
// values turbo3t.
inline constexpr const char* kDefaultCacheTypeK = "q8_0";
inline constexpr const char* kDefaultCacheTypeV = "turbo3t";
// Help text of --cache-type-k / --cache-type-v (which = "K" or "V"), naming the types and the defaults:
// run, logits and bench use the project's (above); eval uses f16 (eval/kv_types.h), a reference.
enum class KvDefaults { kProject, kEval, kNone /* the option is required */ };
std::string kv_type_help(const char* which, KvDefaults defaults = KvDefaults::kProject);

// CLI11 validators: a K cache type name (kv/kv_type.h), a V cache spec (a type, or one with a precision
// window such as turbo3w, kv/v_window.h), a comma-separated token id list (parse_ids), a weight type
// `quantize` can write (quant/quant.h). They run during parsing, so a bad value is a usage error (exit 2).
// error_check: from any function that throws polykv::Error on a bad value (its message is the error).
CLI::Validator error_check(void (*parse)(const std::string&), const char* name);
CLI::Validator kv_k_type_check();
CLI::Validator kv_v_type_check();
CLI::Validator token_ids_check();
// A type `polykv quantize` can write; with_mixes: or a weight mix's name (quant/weight_mix.h).
CLI::Validator quantize_type_check(bool with_mixes = false);

// -t/--threads N (or another name): 1 <= N <= 1024, else a usage error; N above the hardware threads
// is honored with a one-line warning on stderr. Not given: threads keeps its value (0: all cores).
CLI::Option* add_threads_option(CLI::App& app, int& threads, const std::string& name = "-t,--threads",
                                const std::string& help = "threads (default: all cores)");

// --device NAME: where the model runs ("auto": a CUDA GPU when this build has one and one is
// visible, else the CPU; "cpu"; "cuda" / "cuda:N"). Checked when the backend is made.
CLI::Option* add_device_option(CLI::App& app, std::string& device);
// --batch-invariant: every row of a step gets the bits it would get in a step of its own
// (BackendOptions::batch_invariant: speculative verify rows as decoded alone, a sequence whatever its
// batch). Costs speed on CUDA (docs/CUDA_SPEC.md); the CPU is batch invariant anyway.
CLI::Option* add_batch_invariant_option(CLI::App& app, bool& on);
// --batch-invariant / --no-batch-invariant when given (opt counted), else `drafting`: a command that can
// speculate turns batch invariance on by default, so that greedy output with a drafter equals greedy
// output without it on CUDA too (docs/CUDA_SPEC.md).
bool resolve_batch_invariant(const CLI::Option* opt, bool given_value, bool drafting);

// -ub/--ubatch N: prompt tokens per forward pass (1 <= N <= 65536, else a usage error). Longer passes read
// the weights fewer times per prompt (on CUDA, prefill dequantizes each weight once per pass) at the cost of
// scratch memory for N rows. Not given: ubatch keeps its value, 0 = the backend's
// (Backend::default_prompt_rows: 512 on the CPU, 4096 on CUDA); resolve_ubatch turns 0 into that.
CLI::Option* add_ubatch_option(CLI::App& app, int& ubatch);
int resolve_ubatch(int ubatch, const Backend& backend);

// --rope-scaling none|linear|yarn, --rope-scale F, --rope-freq-base B, --yarn-orig-ctx N (llama.cpp's
// names): RoPE settings over the model file's (model/config.h RopeOverride), to run a model past its
// training context, e.g. --rope-scaling yarn --rope-scale 4 for four times the context.
void add_rope_options(CLI::App& app, RopeOverride& rope);

// --k-eq ALPHA: per-channel K equalization strength (0: off), see kv/k_equalizer.h.
void add_k_eq_option(CLI::App& app, float& alpha);
// Installs K equalization of strength alpha (if > 0) in a fresh cache of the model.
void apply_k_eq(const Model& model, KvCache& kv, float alpha);

// One line on stderr: KV types and exact bytes per token (per layer and all layers).
void print_kv_summary(const KvCache& kv);
// The same for any sequence: a KvCache as above, a sequence in a block store (a GPU's) from its store.
void print_kv_summary(const KvSequence& kv);

// "1,2,3" -> {1, 2, 3}. Each item is decimal digits (at most INT32_MAX), optionally with spaces around
// it ("1, 2, 3"); empty items ("1,,2", "1,2,"), signs, other characters, tabs or newlines, and an
// empty list throw UsageError naming the item.
std::vector<int32_t> parse_ids(const std::string& text);

}  // namespace polykv::cli
