// `polykv eval <ppl|kld|needle> ...`: model quality measurements (see src/eval/). Results go to
// stdout (a table, or one JSON object with --json); progress goes to stderr.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/eval_commands.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace polykv::cli {
namespace {

struct EvalSub {
  const char* name;
  int (*fn)(int, char**);
  const char* help;
};

const EvalSub kEvalSubs[] = {
    {"ppl", cmd_eval_ppl, "perplexity over token rows (-f TEXT or --ids FILE.i32)"},
    {"kld", cmd_eval_kld, "KL divergence of next-token distributions: test KV types vs reference"},
    {"needle", cmd_eval_needle, "needle-in-a-haystack retrieval accuracy (--cases FILE.jsonl)"},
};

void eval_usage(FILE* out) {
  std::fprintf(out, "usage: polykv eval <sub> [options]\n\nsubcommands:\n");
  for (const auto& s : kEvalSubs) std::fprintf(out, "  %-8s %s\n", s.name, s.help);
  std::fprintf(out, "\n`polykv eval <sub> --help` describes its options.\n");
}

}  // namespace

void add_row_source_options(CLI::App& app, RowSourceOptions& o) {
  app.add_option("-f,--file", o.text_path, "text file: tokenized (BOS added per the vocabulary), split into rows of CTX");
  app.add_option("--ids", o.ids_path, "int32 token ids, rows of CTX tokens back to back (e.g. ppl_dev_ids.i32)");
  app.add_option("-c,--ctx-size", o.ctx, "tokens per row, each row evaluated from position 0")
      ->check(CLI::Range(2, 1 << 24))
      ->capture_default_str();
  app.add_option("--rows", o.max_rows, "evaluate only the first N rows (0: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--chunk", o.chunk_tokens, "tokens per forward pass")->check(CLI::Range(1, 1 << 20))->capture_default_str();
}

void check_row_source(const RowSourceOptions& o) {
  usage_check(o.text_path.empty() != o.ids_path.empty(), "give exactly one of -f/--file and --ids");
  check_ctx(o.ctx);
}

TokenRows load_rows(const RowSourceOptions& o, const Tokenizer& tok) {
  check_row_source(o);
  TokenRows rows = o.ids_path.empty() ? tokenize_text_file(o.text_path, tok, o.ctx) : read_token_rows(o.ids_path, o.ctx);
  rows.keep_rows(o.max_rows);
  return rows;
}

int cmd_eval(int argc, char** argv) {
  if (argc < 2) {
    eval_usage(stderr);
    return 2;
  }
  const std::string sub = argv[1];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    eval_usage(stdout);
    return 0;
  }
  for (const auto& s : kEvalSubs) {
    if (sub != s.name) continue;
    try {
      return s.fn(argc - 1, argv + 1);
    } catch (const UsageError& e) {  // both named with the subcommand, as main does for verbs
      return usage_error(std::string("polykv eval ") + s.name, e.what());
    } catch (const Error& e) {
      std::fprintf(stderr, "polykv eval %s: error: %s\n", s.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "polykv eval: error: unknown subcommand '%s'\n\n", sub.c_str());
  eval_usage(stderr);
  return 2;
}

}  // namespace polykv::cli
