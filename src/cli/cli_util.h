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

namespace polykv {
class Model;
}

namespace polykv::cli {

// Parses argv with app. Returns an exit code to return at once (0 after --help, 2 after a usage
// error, with the message and usage printed), or nullopt when the command should run.
// llama.cpp-style short options with several letters (-ctk, -ctv) are spelled out for CLI11.
inline std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args;  // CLI11 takes them in reverse order, program name excluded
  for (int i = argc - 1; i >= 1; --i) {
    std::string a = argv[i];
    if (a == "-ctk") a = "--cache-type-k";
    if (a == "-ctv") a = "--cache-type-v";
    args.push_back(a);
  }
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return 0;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return std::nullopt;
}

// The project's default KV cache types (DESIGN.md §4): keys q8_0 (softmax amplifies their error),
// values turbo3.
inline constexpr const char* kDefaultCacheTypeK = "q8_0";
inline constexpr const char* kDefaultCacheTypeV = "turbo3t";
// Help text of --cache-type-k / --cache-type-v (which = "K" or "V").
std::string kv_type_help(const char* which);

// -t/--threads N (or another name): 1 <= N <= 1024, else a usage error; N above the hardware threads
// is honored with a one-line warning on stderr. Not given: threads keeps its value (0: all cores).
CLI::Option* add_threads_option(CLI::App& app, int& threads, const std::string& name = "-t,--threads",
                                const std::string& help = "threads (default: all cores)");

// --k-eq ALPHA: per-channel K equalization strength (0: off), see kv/k_equalizer.h.
void add_k_eq_option(CLI::App& app, float& alpha);
// Installs K equalization of strength alpha (if > 0) in a fresh cache of the model.
void apply_k_eq(const Model& model, KvCache& kv, float alpha);

// One line on stderr: KV types and exact bytes per token (per layer and all layers).
void print_kv_summary(const KvCache& kv);

// "1,2,3" -> {1, 2, 3}; throws Error on anything else.
std::vector<int32_t> parse_ids(const std::string& text);


}  // namespace polykv::cli
