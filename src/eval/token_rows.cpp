#include "eval/token_rows.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace polykv {
namespace {

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open '", path, "'");
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  check(!in.bad(), "read from '", path, "' failed");
  return data;
}

}  // namespace

void TokenRows::keep_rows(int max_rows) {
  if (max_rows > 0 && max_rows < n_rows()) ids.resize(size_t(max_rows) * size_t(ctx));
}

void check_ctx(int ctx) { check(ctx >= 2, "context size ", ctx, " is too small: a row needs at least 2 tokens"); }

TokenRows read_token_rows(const std::string& path, int ctx) {
  check_ctx(ctx);
  const std::string bytes = read_whole_file(path);
  const size_t row_bytes = 4 * size_t(ctx);
  check(!bytes.empty(), "'", path, "' is empty");
  check(bytes.size() % row_bytes == 0, "'", path, "' has ", bytes.size(), " bytes, not a multiple of 4 * ctx = ",
        row_bytes, " (int32 rows of ", ctx, " tokens); is -c right?");
  TokenRows rows;
  rows.ctx = ctx;
  rows.ids.resize(bytes.size() / 4);
  std::memcpy(rows.ids.data(), bytes.data(), bytes.size());  // little-endian hosts only (x86-64)
  return rows;
}

TokenRows split_into_rows(std::span<const int32_t> ids, int ctx) {
  check_ctx(ctx);
  check(ids.size() >= size_t(ctx), "the text has ", ids.size(), " tokens, fewer than one row of ", ctx);
  TokenRows rows;
  rows.ctx = ctx;
  rows.ids.assign(ids.begin(), ids.begin() + ptrdiff_t(ids.size() / size_t(ctx) * size_t(ctx)));
  return rows;
}

TokenRows tokenize_text_file(const std::string& path, const Tokenizer& tok, int ctx) {
  check_ctx(ctx);
  const std::string text = read_whole_file(path);
  const std::vector<int32_t> ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  return split_into_rows(ids, ctx);
}

void check_ids_in_vocab(const TokenRows& rows, int n_vocab) {
  for (size_t i = 0; i < rows.ids.size(); ++i)
    check(rows.ids[i] >= 0 && rows.ids[i] < n_vocab, "token id ", rows.ids[i], " (row ", i / size_t(rows.ctx),
          ", position ", i % size_t(rows.ctx), ") is outside the vocabulary of ", n_vocab);
}

}  // namespace polykv
