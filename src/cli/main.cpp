// polykv: the command-line front end. `polykv <verb> [args]`; see `polykv --help`.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"

namespace {

struct Verb {
  const char* name;
  int (*fn)(int, char**);
  const char* help;
};

const Verb kVerbs[] = {
    {"run", polykv::cli::cmd_run, "generate text from a prompt"},
    {"serve", polykv::cli::cmd_serve, "serve the model over HTTP (OpenAI-compatible API, named pools)"},
    {"logits", polykv::cli::cmd_logits, "write the logits of one forward pass over token ids"},
    {"eval", polykv::cli::cmd_eval, "quality: perplexity, KL divergence vs a reference KV type, needle retrieval"},
    {"bench", polykv::cli::cmd_bench, "measure prefill and decode tokens/s"},
    {"bench-agents", polykv::cli::cmd_bench_agents, "many agents over one shared context: KV memory, TTFT, decode"},
    {"quantize", polykv::cli::cmd_quantize, "re-quantize a model's weight matrices"},
    {"inspect", polykv::cli::cmd_inspect, "print a GGUF file's metadata and tensors"},
    {"synth", polykv::cli::cmd_synth, "write a random-weight GGUF shaped like a real model"},
    {"tokenize", polykv::cli::cmd_tokenize, "text on stdin -> token ids on stdout"},
    {"detokenize", polykv::cli::cmd_detokenize, "token ids on stdin -> text on stdout"},
    {"template", polykv::cli::cmd_template, "render a chat template for a conversation"},
    {"bench-tokenize", polykv::cli::cmd_bench_tokenize, "tokenizer encoding throughput on a text file"},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: polykv <command> [options]\n\ncommands:\n");
  for (const auto& v : kVerbs) std::fprintf(out, "  %-12s %s\n", v.name, v.help);
  std::fprintf(out, "\n`polykv <command> --help` describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string verb = argv[1];
  if (verb == "--help" || verb == "-h" || verb == "help") {
    usage(stdout);
    return 0;
  }
  for (const auto& v : kVerbs) {
    if (verb != v.name) continue;
    // Exit codes: 0 success; 2 usage error (the command line itself is wrong: CLI11's parse errors,
    // printed by parse_args, and UsageError); 1 any other Error (missing or corrupt file, runtime failure).
    try {
      return v.fn(argc - 1, argv + 1);
    } catch (const polykv::UsageError& e) {
      return polykv::cli::usage_error(std::string("polykv ") + v.name, e.what());
    } catch (const polykv::Error& e) {
      std::fprintf(stderr, "polykv %s: error: %s\n", v.name, e.what());
      return 1;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "polykv %s: error: out of memory\n", v.name);
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "polykv %s: internal error: %s\n", v.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "polykv: error: unknown command '%s'\n\n", verb.c_str());
  usage(stderr);
  return 2;
}
