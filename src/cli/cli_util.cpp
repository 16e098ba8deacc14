#include "cli/cli_util.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "backend/backend.h"
#include "core/error.h"
#include "eval/kv_types.h"
#include "kv/kv_block_store.h"
#include "kv/v_window.h"
#include "model/model.h"
#include "quant/quant.h"
#include "quant/weight_mix.h"

namespace polykv::cli {

CLI::Option* add_device_option(CLI::App& app, std::string& device) {
  return app.add_option("--device", device, "where the model runs: auto (a CUDA GPU if present, else cpu), cpu, cuda, cuda:N")
      ->capture_default_str();
}

CLI::Option* add_batch_invariant_option(CLI::App& app, bool& on) {
  return app.add_flag("--batch-invariant,!--no-batch-invariant", on,
                      "CUDA: every row of a step gets the bits it would get alone (speculative verify rows as "
                      "decoded one at a time, a sequence whatever its batch); slower. Default: on when a drafter "
                      "is configured (--spec, --model-draft, --model-mtp), so that speculation is lossless; the CPU "
                      "always is");
}

CLI::Option* add_ubatch_option(CLI::App& app, int& ubatch) {
  return app.add_option("--ubatch", ubatch,
                        "prompt tokens per forward pass (-ub; default: 512 on the CPU, 4096 on CUDA; more: fewer "
                        "weight reads per prompt, more scratch memory)")
      ->check(CLI::Range(1, 65536));
}

void add_rope_options(CLI::App& app, RopeOverride& rope) {
  app.add_option("--rope-scaling", rope.scaling,
                 "RoPE scaling over the model file's: none, linear or yarn (with --rope-scale: run past the "
                 "training context)")
      ->check(CLI::IsMember({"none", "linear", "yarn"}));
  app.add_option("--rope-scale", rope.scale, "RoPE scaling factor: the context grows by it (linear: positions / F)")
      ->check(CLI::Range(1.0f, 1024.0f));
  app.add_option("--rope-freq-base", rope.freq_base, "RoPE base frequency θ of the global attention layers")
      ->check(CLI::Range(1.0f, 1e12f));
  app.add_option("--yarn-orig-ctx", rope.yarn_orig_ctx, "YaRN: the original context (default: the model's)")
      ->check(CLI::Range(1, 1 << 24));
}

int resolve_ubatch(int ubatch, const Backend& backend) {
  return ubatch > 0 ? ubatch : backend.default_prompt_rows();
}

bool resolve_batch_invariant(const CLI::Option* opt, bool given_value, bool drafting) {
  return opt != nullptr && opt->count() > 0 ? given_value : drafting;
}

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

int usage_error(const std::string& command, const std::string& what) {
  std::string line = what;  // one line: CLI11 messages may hold newlines
  for (char& c : line)
    if (c == '\n') c = ' ';
  while (!line.empty() && line.back() == ' ') line.pop_back();
  std::fprintf(stderr, "%s: error: %s\nrun `%s --help` for usage\n", command.c_str(), line.c_str(), command.c_str());
  return 2;
}

std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args;  // CLI11 takes them in reverse order, program name excluded
  for (int i = argc - 1; i >= 1; --i) {
    std::string a = argv[i];
    if (a == "-ctk") a = "--cache-type-k";
    if (a == "-ctv") a = "--cache-type-v";
    if (a == "-ub") a = "--ubatch";
    args.push_back(a);
  }
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help (CallForHelp): help on stdout
    return usage_error(app.get_name(), e.what());
  }
  return std::nullopt;
}

CLI::Validator error_check(void (*parse)(const std::string&), const char* name) {
  return CLI::Validator(
      [parse](std::string& value) -> std::string {
        try {
          parse(value);
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      "", name);
}

CLI::Validator kv_k_type_check() {
  return error_check([](const std::string& s) { (void)parse_kv_type(s); }, "KV_TYPE_K");
}

CLI::Validator kv_v_type_check() {
  return error_check([](const std::string& s) { (void)parse_v_cache_spec(s); }, "KV_TYPE_V");
}

CLI::Validator token_ids_check() {
  return error_check([](const std::string& s) { (void)parse_ids(s); }, "TOKEN_IDS");
}

static void check_quantize_type(const std::string& s, bool with_mixes) {
  if (with_mixes && weight_mix_from_name(s)) return;
  std::string targets;  // every type quantize can write, from quant/quant.h
  for (uint32_t id = 0; id < 256; ++id)  // ids are < 256 (ptq1_0 is 143)
    if (const DTypeInfo* info = dtype_info(id); info && can_quantize(info->type))
      targets += (targets.empty() ? "" : ", ") + std::string(info->name);
  if (with_mixes) targets += "; weight mixes: " + weight_mix_names();
  DType t{};
  try {
    t = dtype_from_name(s);
  } catch (const Error&) {
    fail("unknown type '", s, "' (valid: ", targets, ")");
  }
  check(can_quantize(t), "polykv cannot quantize to ", dtype_name(t), " (valid: ", targets, ")");
}

CLI::Validator quantize_type_check(bool with_mixes) {
  if (with_mixes) return error_check([](const std::string& s) { check_quantize_type(s, true); }, "QUANT_TYPE");
  return error_check([](const std::string& s) { check_quantize_type(s, false); }, "QUANT_TYPE");
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
  usage_check(text.find_first_not_of(' ') != std::string::npos, "no token ids given (expected e.g. 1,2,3)");
  size_t begin = 0, n_item = 0;
  while (true) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    ++n_item;
    std::string item = text.substr(begin, comma - begin);
    const size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    usage_check(a != std::string::npos, "item ", n_item, " of '", text, "' is empty");
    item = item.substr(a, b - a + 1);
    usage_check(item.find_first_of("\t\n\r\v\f") == std::string::npos, "item ", n_item,
                " holds a tab or line break (write e.g. 1,2,3)");
    int64_t v = 0;
    for (char c : item) {
      usage_check(c >= '0' && c <= '9', "item ", n_item, " ('", item, "') is not a token id: decimal digits expected");
      v = v * 10 + (c - '0');
      usage_check(v <= INT32_MAX, "item ", n_item, " ('", item, "') is too large for a token id");
    }
    ids.push_back(int32_t(v));
    if (comma == text.size()) break;
    begin = comma + 1;
  }
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

void print_kv_summary(const KvSequence& kv) {
  if (const auto* cache = dynamic_cast<const KvCache*>(&kv)) return print_kv_summary(*cache);
  const KvBlockStore* s = kv.block_store();
  if (!s) return;
  const size_t k_layer = s->k_head_bytes() * size_t(s->shape().n_head_kv);
  const size_t v_layer = s->v_head_bytes() * size_t(s->shape().n_head_kv);
  std::fprintf(stderr, "KV cache (%s memory): K %s, V %s: %zu + %zu = %zu bytes per token per layer, %zu bytes per token (%d layers)\n",
               s->memory().name(), kv_type_name(s->k_type()), kv_type_name(s->v_type()), k_layer, v_layer,
               k_layer + v_layer, s->bytes_per_token(), s->shape().n_layer);
}

std::string kv_type_help(const char* which, KvDefaults defaults) {
  const bool v = which[0] == 'V';
  std::string h = std::string("KV cache type for ") + which + " (-ct" + char(std::tolower(which[0])) + "): " +
                  kv_type_names() + (v ? "; a 'w' suffix (turbo3w) keeps 4 sink + 26 recent positions in q8_0" : "");
  const std::string project = v ? kDefaultCacheTypeV : kDefaultCacheTypeK, ref = v ? KvTypePair{}.v : KvTypePair{}.k;
  if (defaults == KvDefaults::kNone) return h;
  if (defaults == KvDefaults::kEval)
    return h + ". eval defaults to " + ref + ", a reference to measure others against; run, logits and bench default to " +
           project;
  return h + ". Default " + project + " (eval defaults to " + ref + ", a reference)";
}

}  // namespace polykv::cli
