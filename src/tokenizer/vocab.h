// A tokenizer vocabulary as stored in GGUF metadata (`tokenizer.ggml.*`): pieces, scores, token types,
// merges and the special ids. Pure data plus lookups; the algorithms live in spm.h, bpe.h, wordpiece.h.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace polykv {

class GgufFile;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

enum class VocabKind {
  SentencePiece,  // tokenizer.ggml.model = "llama": score-ordered merges, ▁ for space, <0xNN> fallback
  ByteLevelBpe,   // "gpt2": GPT-2 byte-to-unicode alphabet, ranked merges, regex pre-tokenizer
  WordPiece,      // "bert": greedy longest match, ▁ marks a word start
};

// Hash that lets unordered_map<std::string, V> be queried with a string_view without allocating.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceToId = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

inline constexpr int32_t kNoToken = -1;

struct Vocab {
  VocabKind kind = VocabKind::SentencePiece;
  std::string model_name;  // tokenizer.ggml.model
  std::string pre_name;    // tokenizer.ggml.pre ("" when absent)

  std::vector<std::string> pieces;  // id -> text as stored (▁ / byte-level alphabet / ## stripped)
  std::vector<float> scores;        // id -> score (0 when the file has none)
  std::vector<TokenType> types;     // id -> type (Normal when the file has none)
  PieceToId piece_to_id;            // text -> first id with that text
  std::vector<std::string> merges;  // BPE merges "left right", in rank order

  int32_t bos = kNoToken, eos = kNoToken, unk = kNoToken, pad = kNoToken, sep = kNoToken;
  int32_t eot = kNoToken, eom = kNoToken;
  bool add_bos = false, add_eos = false, add_sep = false;
  bool add_space_prefix = false;  // SentencePiece: prepend ▁ to text that starts a segment
  std::vector<int32_t> end_of_generation;  // sorted ids that end generation (eos, eot, <|im_end|>, ...)

  // Byte fallback: byte value -> id of its <0xNN> token (kNoToken when the vocabulary has none).
  std::array<int32_t, 256> byte_token{};

  static Vocab from_gguf(const GgufFile& f);

  int32_t size() const { return static_cast<int32_t>(pieces.size()); }
  int32_t find(std::string_view text) const {
    auto it = piece_to_id.find(text);
    return it == piece_to_id.end() ? kNoToken : it->second;
  }
  bool valid(int32_t id) const { return id >= 0 && id < size(); }
  TokenType type(int32_t id) const { return types[static_cast<size_t>(id)]; }
  // Control and unknown tokens: not text, rendered only on request.
  bool is_control_like(int32_t id) const {
    const TokenType t = type(id);
    return t == TokenType::Control || t == TokenType::Unknown;
  }
};

}  // namespace polykv
