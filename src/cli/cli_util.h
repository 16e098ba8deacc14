// Shared helpers for the command implementations.
#pragma once
#include <CLI/CLI.hpp>
#include <optional>

namespace polykv::cli {

// Parses argv with app. Returns an exit code to return at once (0 after --help, 2 after a usage
// error, with the message and usage printed), or nullopt when the command should run.
inline std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return 0;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return std::nullopt;
}

}  // namespace polykv::cli
