// `polykv tokenize`, `polykv detokenize`, `polykv bench-tokenize`: the tokenizer of a GGUF file on
// stdin/stdout, and its encoding throughput.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace polykv::cli {

namespace {

std::string read_all(std::istream& in) { return std::string(std::istreambuf_iterator<char>(in), {}); }

std::string read_file_text(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  check(f != nullptr, "cannot open ", path);
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

// Parses whitespace-separated token ids; a token that is not an integer, or an id outside the
// vocabulary, is an Error naming it.
std::vector<int32_t> parse_ids(const std::string& text, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (true) {
    pos = text.find_first_not_of(" \t\r\n\f\v", pos);
    if (pos == std::string::npos) break;
    const size_t end = std::min(text.find_first_of(" \t\r\n\f\v", pos), text.size());
    const std::string word = text.substr(pos, end - pos);
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(word, &used, 10);
    } catch (const std::exception&) {
      used = 0;
    }
    check(used == word.size() && used > 0, "'", word, "' is not a token id (integer expected)");
    check(value >= 0 && value < tok.n_vocab(), "token id ", word, " is outside the vocabulary (0..",
          tok.n_vocab() - 1, ")");
    ids.push_back(static_cast<int32_t>(value));
    pos = end;
  }
  return ids;
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  CLI::App app{"Tokenize text read from stdin; prints the ids space-separated on one line", "polykv tokenize"};
  std::string model;
  bool no_bos = false, parse_special = false;
  app.add_option("-m,--model", model, "GGUF file holding the vocabulary")->required();
  app.add_flag("--no-bos", no_bos, "do not add the BOS/EOS tokens the vocabulary asks for");
  app.add_flag("--parse-special", parse_special, "recognise control tokens (e.g. <s>) written in the text");
  if (auto rc = parse_args(app, argc, argv)) return *rc;

  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(model));
  const std::string text = read_all(std::cin);
  const auto ids = tok.encode(text, !no_bos, parse_special);
  std::string line;
  for (int32_t id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
  std::printf("%s\n", line.c_str());
  return 0;
}

int cmd_detokenize(int argc, char** argv) {
  CLI::App app{"Turn whitespace-separated token ids read from stdin back into text", "polykv detokenize"};
  std::string model;
  bool render_special = false;
  app.add_option("-m,--model", model, "GGUF file holding the vocabulary")->required();
  app.add_flag("--special", render_special, "write control tokens (BOS, EOS, ...) as their text");
  if (auto rc = parse_args(app, argc, argv)) return *rc;

  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(model));
  const auto ids = parse_ids(read_all(std::cin), tok);
  const std::string text = tok.decode(ids, render_special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

int cmd_bench_tokenize(int argc, char** argv) {
  CLI::App app{"Measure encoding throughput on a text file", "polykv bench-tokenize"};
  std::string model, file;
  int repeat = 3;
  app.add_option("-m,--model", model, "GGUF file holding the vocabulary")->required();
  app.add_option("-f,--file", file, "text file to encode")->required();
  app.add_option("-r,--repeat", repeat, "timed runs (the best is reported)")->check(CLI::PositiveNumber);
  if (auto rc = parse_args(app, argc, argv)) return *rc;

  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(model));
  const std::string text = read_file_text(file);
  double best = 1e30;
  size_t n_tokens = 0;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    n_tokens = tok.encode(text, false, false).size();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("%s: %.2f MB -> %zu tokens (%.2f bytes/token) in %.3f s: %.2f MB/s, %.0f tokens/s\n", file.c_str(), mb,
              n_tokens, n_tokens ? static_cast<double>(text.size()) / static_cast<double>(n_tokens) : 0.0, best,
              mb / best, static_cast<double>(n_tokens) / best);
  return 0;
}

}  // namespace polykv::cli
