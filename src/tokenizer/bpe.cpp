#include "tokenizer/bpe.h"

#include <queue>
#include <string>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace polykv {

namespace {

// Same linked-list scheme as spm.cpp: a symbol covers word[start, start + len) and has token id `id`
// (kNoToken when that text is not a token); merged-away symbols have len = 0.
struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t start;
  uint32_t len;
  int32_t id;
};

struct Bigram {
  int32_t rank;
  int32_t left;
  int32_t right;
  uint32_t size;  // left.len + right.len when queued; differs once either symbol changed (stale)
  int32_t result;
};

struct BigramOrder {  // priority_queue top = lowest rank, then leftmost
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// Words longer than this are not cached (they are rare and would bloat the cache).
constexpr size_t kMaxCachedWordBytes = 64;
constexpr size_t kMaxCacheEntries = 1 << 16;

}  // namespace

BpeEncoder::BpeEncoder(const Vocab& vocab) : vocab_(vocab), pre_(PreTokenizer::for_name(vocab.pre_name)) {
  merges_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& m = vocab.merges[rank];
    const size_t space = m.find(' ', 1);  // a side may itself start with a space in non-byte vocabularies
    if (space == std::string::npos) continue;
    const std::string_view left(m.data(), space), right(m.data() + space + 1, m.size() - space - 1);
    const int32_t l = vocab.find(left), r = vocab.find(right);
    if (l == kNoToken || r == kNoToken) continue;
    std::string joined(left);
    joined += right;
    merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), vocab.find(joined)});
  }
}

void BpeEncoder::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const PreTokenizerTraits& traits = pre_.traits();
  if (traits.ignore_merges ||
      (traits.whole_newline_runs && word.find_first_not_of('\n') == std::string_view::npos)) {
    const int32_t whole = vocab_.find(word);
    if (whole != kNoToken) {
      out.push_back(whole);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t pos = 0; pos < word.size();) {  // the alphabet form is well-formed UTF-8
    size_t len = utf8::valid_sequence_length(word, pos);
    if (len == 0) len = 1;
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, index + 1, static_cast<uint32_t>(pos), static_cast<uint32_t>(len),
                       vocab_.find(word.substr(pos, len))});
    pos += len;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    if (l.id == kNoToken || r.id == kNoToken) return;
    const auto it = merges_.find(pair_key(l.id, r.id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, l.len + r.len, it->second.result});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size) continue;  // stale
    l.len += r.len;
    l.id = b.result;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id != kNoToken)
      out.push_back(s.id);
    else
      encode_fallback(word.substr(s.start, s.len), out);
  }
}

// A symbol that is not a token (a merge result missing from the vocabulary, or a character the vocabulary
// lacks): one token per byte where possible (its alphabet character, or its <0xNN> token), else the unknown token.
void BpeEncoder::encode_fallback(std::string_view text, std::vector<int32_t>& out) const {
  if (!pre_.traits().byte_level) {
    for (char c : text) {
      const int32_t id = vocab_.byte_token[static_cast<uint8_t>(c)];
      if (id != kNoToken)
        out.push_back(id);
      else if (vocab_.unk != kNoToken)
        out.push_back(vocab_.unk);
    }
    return;
  }
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::instance();
  for (char c : alphabet.decode(text)) {
    const int32_t id = vocab_.find(alphabet.encode_byte(static_cast<uint8_t>(c)));
    if (id != kNoToken)
      out.push_back(id);
    else if (vocab_.unk != kNoToken)
      out.push_back(vocab_.unk);
  }
}

void BpeEncoder::encode(std::string_view text, bool /*starts_segment*/, std::vector<int32_t>& out) const {
  const PreTokenizerTraits& traits = pre_.traits();
  std::string escaped;
  if (traits.escape_whitespace) {
    static constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581
    escaped.reserve(text.size() + text.size() / 4);
    for (char c : text) {
      if (c == ' ')
        escaped += kSpaceMarker;
      else
        escaped += c;
    }
    text = escaped;
  }
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::instance();
  // Per-call cache: natural text repeats words a lot, and a local cache needs no locking.
  std::unordered_map<std::string, std::vector<int32_t>> cache;
  std::string word;
  std::vector<int32_t> ids;
  for (const PieceSpan& span : pre_.split(text)) {
    const std::string_view piece = text.substr(span.offset, span.length);
    word.clear();
    if (traits.byte_level)
      alphabet.encode(piece, word);
    else
      word.assign(piece);
    if (word.size() > kMaxCachedWordBytes) {
      encode_word(word, out);
      continue;
    }
    if (const auto it = cache.find(word); it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      continue;
    }
    ids.clear();
    encode_word(word, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    if (cache.size() >= kMaxCacheEntries) cache.clear();
    cache.emplace(word, ids);
  }
}

}  // namespace polykv
