#include "cli/cli_util.h"

#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace polykv::cli {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string item;
  std::stringstream ss(text);
  while (std::getline(ss, item, ',')) {
    const size_t a = item.find_first_not_of(" \t\n"), b = item.find_last_not_of(" \t\n");
    check(a != std::string::npos, "empty token id in '", text, "'");
    item = item.substr(a, b - a + 1);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    check(end && *end == '\0' && v >= 0 && v <= INT32_MAX, "'", item, "' is not a token id");
    ids.push_back(int32_t(v));
  }
  check(!ids.empty(), "no token ids given");
  return ids;
}

DType parse_kv_type(const std::string& name) { return dtype_from_name(name); }

}  // namespace polykv::cli
