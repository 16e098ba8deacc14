// Shared helpers for the command implementations.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

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

// "1,2,3" -> {1, 2, 3}; throws Error on anything else.
std::vector<int32_t> parse_ids(const std::string& text);

// A KV cache type name (f32, f16, bf16, ...); throws Error if unknown.
DType parse_kv_type(const std::string& name);

}  // namespace polykv::cli
