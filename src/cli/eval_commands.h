// The `polykv eval <sub>` subcommands (cmd_eval dispatches to them) and what they share. Each takes
// the arguments after `eval` (argv[0] is the subcommand name) and returns the exit code.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "eval/token_rows.h"

namespace polykv {
class Tokenizer;
}

namespace polykv::cli {

int cmd_eval_ppl(int argc, char** argv);
int cmd_eval_kld(int argc, char** argv);
int cmd_eval_needle(int argc, char** argv);

// Where the rows of an evaluation come from: -f TEXT or --ids FILE.i32, and their shape.
struct RowSourceOptions {
  std::string text_path;
  std::string ids_path;
  int ctx = 512;
  int max_rows = 0;  // 0: all
  int chunk_tokens = 512;
};
void add_row_source_options(CLI::App& app, RowSourceOptions& o);
// Throws UsageError unless exactly one of -f / --ids is given, Error unless ctx >= 2 (-c's validator
// already refuses less); checked before loading a model.
void check_row_source(const RowSourceOptions& o);
// check_row_source, then reads the rows; throws Error if they do not load.
TokenRows load_rows(const RowSourceOptions& o, const Tokenizer& tok);

}  // namespace polykv::cli
