#include "cli/cli_util.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "model/model.h"

namespace polykv::cli {

CLI::Option* add_threads_option(CLI::App& app, int& threads, const std::string& name, const std::string& help) {
  const std::string flag = name.substr(0, name.find(','));
  return app
      .add_option_function<int>(
          name,
          [&threads, flag](const int& n) {
            threads = n;
            const unsigned hw = std::thread::hardware_concurrency();
            if (hw > 0 && unsigned(n) > hw)
              std::fprintf(stderr, "%s %d exceeds the %u hardware threads; this will be slow\n", flag.c_str(), n, hw);
          },
          help)
      ->check(CLI::Range(1, 1024));
}

void add_k_eq_option(CLI::App& app, float& alpha) {
  app.add_option("--k-eq", alpha, "per-channel K equalization per layer and KV head, scales (rms ratio)^ALPHA; 0: off")
      ->check(CLI::Range(0.0f, 1.0f));
}

void apply_k_eq(const Model& model, KvCache& kv, float alpha) {
  if (alpha > 0) kv.set_k_equalizer(model.make_k_equalizer(KEqualizationParams{alpha}));
}


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

void print_kv_summary(const KvCache& kv) {
  const KvShape& sh = kv.shape();
  const size_t k_layer = kv.k_head_bytes() * size_t(sh.n_head_kv), v_layer = kv.v_head_bytes() * size_t(sh.n_head_kv);
  std::fprintf(stderr, "KV cache: K %s, V %s: %zu + %zu = %zu bytes per token per layer, %zu bytes per token (%d layers)\n",
               kv_type_name(kv.k_type()), kv_type_name(kv.v_type()), k_layer, v_layer, k_layer + v_layer,
               kv.bytes_per_token(), sh.n_layer);
  if (kv.v_window().enabled())
    std::fprintf(stderr, "V precision window: %d sink + %d recent positions in %s: %zu bytes in all layers\n",
                 kv.v_window().n_sink, kv.v_window().recent, kv_type_name(kv.v_window().type), kv.v_window_bytes());
}

std::string kv_type_help(const char* which) {
  return std::string("KV cache type for ") + which + " (-ct" + char(std::tolower(which[0])) + "): " + kv_type_names() +
         (which[0] == 'V' ? "; a 'w' suffix (turbo3w) keeps 4 sink + 26 recent positions in q8_0" : "");
}

}  // namespace polykv::cli
