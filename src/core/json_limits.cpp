#include "core/json_limits.h"

#include <algorithm>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace polykv {
namespace {

bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The last max_bytes of text (or all of it), "..." in front when cut, every byte outside printable
// ASCII written as \xNN: the echo of a bad token may hold invalid UTF-8, and the message must stay
// valid text (a server puts it into a JSON reply).
std::string escaped_tail(std::string_view text, size_t max_bytes) {
  std::string out = text.size() > max_bytes ? "..." : "";
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : text.substr(text.size() > max_bytes ? text.size() - max_bytes : 0)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// nlohmann's message is "<position>: syntax error ... - <reason>; last read: '<token>'[; expected X]",
// where <token> is everything the lexer read of the bad token (a whole 1 MB string, say). The
// offending byte is at the token's end, so keep its tail; then cap the whole message.
std::string shorten_parse_message(std::string_view msg) {
  constexpr std::string_view kLastRead = "; last read: '";
  constexpr size_t kTokenTail = 40, kMessageMax = 400;
  std::string out(msg);
  if (const size_t open = msg.find(kLastRead); open != std::string_view::npos) {
    const size_t token_begin = open + kLastRead.size();
    // The token's closing quote: the last "'; expected " (type names hold no such text), else the
    // message's final character.
    size_t token_end = msg.rfind("'; expected ");
    if (token_end == std::string_view::npos || token_end < token_begin) token_end = msg.size() - 1;
    if (token_end >= token_begin)
      out = std::string(msg.substr(0, token_begin)) +
            escaped_tail(msg.substr(token_begin, token_end - token_begin), kTokenTail) +
            std::string(msg.substr(token_end));
  }
  return truncate_for_message(out, kMessageMax);
}

}  // namespace

std::string truncate_for_message(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t end = max_bytes;
  while (end > 0 && is_utf8_continuation(text[end])) --end;
  return std::string(text.substr(0, end)) + "...";
}

namespace {

// Builds the document from nlohmann's SAX events (the parser itself is iterative), refusing the
// container that would nest past max_depth the moment it opens.
//
// Why not Json::parse with a callback: for ordered_json every member insertion scans the object for
// a duplicate key (ordered_map::emplace), so an object of n members costs O(n^2) — 100 000 keys
// (1 MB of text) took ~30 s. Here a duplicate is found by a linear scan only while the object is
// small, then through a hash index. Duplicate keys behave as in Python's json.loads and in nlohmann:
// the last value wins, at the first key's position.
template <typename Json>
class LimitedBuilder {
 public:
  using string_t = typename Json::string_t;
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using binary_t = typename Json::binary_t;

  LimitedBuilder(Json& root, int max_depth, const char* what) : root_(root), max_depth_(max_depth), what_(what) {
    open_.reserve(static_cast<size_t>(std::min(max_depth, 64)) + 1);
  }

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(number_integer_t v) { return put(v); }
  bool number_unsigned(number_unsigned_t v) { return put(v); }
  bool number_float(number_float_t v, const string_t&) { return put(v); }
  bool string(string_t& v) { return put(std::move(v)); }  // the lexer clears its buffer before reuse
  bool binary(binary_t& v) { return put(Json::binary(std::move(v))); }  // not produced by the JSON parser
  bool start_object(size_t) { return open(Json::object()); }
  bool start_array(size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k) {
    member_ = &member(open_.back(), k);
    return true;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    // A syntax error, or out_of_range 406: a number like 1e999 that overflows a double.
    fail(what_, " is not valid JSON: ", shorten_parse_message(e.what()));
  }

 private:
  static constexpr bool kOrdered = std::is_same_v<Json, nlohmann::ordered_json>;
  static constexpr size_t kLinearScanMembers = 16;  // objects up to this size find duplicates by a scan

  struct Open {
    Json* container;  // stays valid: its parent gets no new member or element while it is open
    std::unordered_map<string_t, size_t> index;  // ordered objects past kLinearScanMembers: key -> position
  };

  // The slot for member `k` of the open object o (a fresh null one unless k is a duplicate).
  Json& member(Open& o, string_t& k) {
    if constexpr (kOrdered) {
      auto& members = static_cast<typename Json::object_t::Container&>(o.container->template get_ref<typename Json::object_t&>());
      if (members.size() < kLinearScanMembers) {
        for (auto& [name, value] : members)
          if (name == k) return value;
      } else {
        if (o.index.empty())
          for (size_t i = 0; i < members.size(); ++i) o.index.emplace(members[i].first, i);
        const auto [it, inserted] = o.index.emplace(k, members.size());
        if (!inserted) return members[it->second].second;
      }
      members.emplace_back(std::move(k), nullptr);
      return members.back().second;
    } else {
      return (*o.container)[std::move(k)];
    }
  }

  // Where the next value goes: the root, the end of the open array, or the object member just named.
  template <typename V>
  Json* place(V&& v) {
    if (open_.empty()) {
      root_ = Json(std::forward<V>(v));
      return &root_;
    }
    Json& parent = *open_.back().container;
    if (parent.is_array()) {
      parent.push_back(Json(std::forward<V>(v)));
      return &parent.back();
    }
    *member_ = Json(std::forward<V>(v));
    return member_;
  }

  template <typename V>
  bool put(V&& v) {
    place(std::forward<V>(v));
    return true;
  }

  bool open(Json container) {
    // open_.size() containers are open around this one, which is number open_.size() + 1.
    if (open_.size() >= static_cast<size_t>(max_depth_)) fail(what_, " JSON nested deeper than ", max_depth_, " levels");
    Json* c = place(std::move(container));
    open_.push_back({c, {}});
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  Json& root_;
  const int max_depth_;
  const char* what_;
  std::vector<Open> open_;  // the containers being filled, outermost first; size() = current depth
  Json* member_ = nullptr;   // the object member the next value goes to
};

}  // namespace

template <typename Json>
Json parse_json_limited(std::string_view text, int max_depth, const char* what) {
  check(max_depth >= 0, "parse_json_limited: negative depth limit");
  Json root;
  LimitedBuilder<Json> builder(root, max_depth, what);
  // strict: anything but whitespace after the document is an error. Errors throw from the builder;
  // a false result without one would be a bug here, not bad input.
  const bool ok = Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json, true);
  check(ok, what, " is not valid JSON");
  return root;
}

template <typename Json>
std::string json_excerpt(const Json& j, size_t max_bytes) {
  if (j.is_array()) return cat("an array of ", j.size(), j.size() == 1 ? " element" : " elements");
  if (j.is_object()) return cat("an object of ", j.size(), j.size() == 1 ? " member" : " members");
  if (j.is_string()) {
    const auto& s = j.template get_ref<const typename Json::string_t&>();
    // Cut before dumping: dump() of a long string costs its whole length.
    if (s.size() > max_bytes) return Json(truncate_for_message(s, max_bytes)).dump(-1, ' ', false,
                                                                                   Json::error_handler_t::replace);
  }
  return truncate_for_message(j.dump(-1, ' ', false, Json::error_handler_t::replace), max_bytes);
}

template nlohmann::json parse_json_limited<nlohmann::json>(std::string_view, int, const char*);
template nlohmann::ordered_json parse_json_limited<nlohmann::ordered_json>(std::string_view, int, const char*);
template std::string json_excerpt<nlohmann::json>(const nlohmann::json&, size_t);
template std::string json_excerpt<nlohmann::ordered_json>(const nlohmann::ordered_json&, size_t);

}  // namespace polykv
