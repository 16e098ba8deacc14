// Evaluation text as rows of token ids. Every row is evaluated on its own from position 0 with a
// fresh KV cache (llama.cpp's perplexity convention without its half-context warm-up: all positions
// of a row are scored).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace polykv {

class Tokenizer;

struct TokenRows {
  int ctx = 0;                  // tokens per row
  std::vector<int32_t> ids;     // [n_rows][ctx], row-major

  int n_rows() const { return ctx > 0 ? int(ids.size() / size_t(ctx)) : 0; }
  std::span<const int32_t> row(int r) const { return {ids.data() + size_t(r) * size_t(ctx), size_t(ctx)}; }
  void keep_rows(int max_rows);  // max_rows <= 0: keep all
};

// Throws Error unless ctx >= 2 (a row must score at least one position).
void check_ctx(int ctx);

// A file of little-endian int32 ids, rows of ctx tokens back to back (e.g. ppl_dev_ids.i32).
// Throws Error if the file is missing, empty, or its size is not a multiple of 4 * ctx bytes.
TokenRows read_token_rows(const std::string& path, int ctx);

// Consecutive chunks of ctx tokens of `ids`; a shorter tail is dropped. Throws Error if not even
// one row fits.
TokenRows split_into_rows(std::span<const int32_t> ids, int ctx);

// Reads a text file, tokenizes it (special tokens the vocabulary asks for added, e.g. BOS, once at
// the start of the text) and splits it with split_into_rows.
TokenRows tokenize_text_file(const std::string& path, const Tokenizer& tok, int ctx);

// Throws Error naming the first id outside [0, n_vocab).
void check_ids_in_vocab(const TokenRows& rows, int n_vocab);

}  // namespace polykv
