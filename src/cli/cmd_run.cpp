// `polykv run -m FILE -p TEXT [-n N] [sampling flags] [--chat]`: generate text, streamed to stdout.
// Timings, the seed when drawn at random, prefill progress (on a terminal) and why generation stopped
// go to stderr, so stdout holds the (echoed prompt and) generated text alone.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "backend/backend.h"
#include "chat/chat_prompt.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/spec_options.h"
#include "core/error.h"
#include "engine/generate.h"
#include "engine/sequence_kv.h"
#include "model/model.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace polykv::cli {

namespace {

// Usage errors among options that parse but do not fit together (exit 2 with a one-line message).
// Flags that would be silently ignored are errors rather than warnings: a run that quietly differs
// from what was asked (no system message, a BOS that is there after all) is worse than a retry.
std::optional<std::string> conflicting_options(bool have_ids, bool chat, bool have_system, bool no_bos,
                                               bool parse_special) {
  if (have_ids) {
    if (chat) return "--chat renders a text prompt; it cannot be used with --ids";
    if (have_system) return "--system is a chat message; it cannot be used with --ids";
    if (no_bos) return "--no-bos has no effect with --ids: the ids are used exactly as given";
    if (parse_special) return "--parse-special has no effect with --ids: the ids are used exactly as given";
  }
  if (have_system && !chat) return "--system needs --chat (the system message goes through the chat template)";
  return std::nullopt;
}

// The prompt's token ids for `--chat`: the template's control tokens only, unless the user asks
// (--parse-special) for control tokens written in the prompt too.
std::vector<int32_t> chat_prompt_ids(const Model& model, const Tokenizer& tok, const std::string& prompt,
                                     const std::string& system_prompt, bool no_bos, bool parse_special) {
  const std::string tmpl = model.gguf().get_str("tokenizer.chat_template", "");
  check(!tmpl.empty(), "the model has no chat template (tokenizer.chat_template); run without --chat");
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", system_prompt}});
  messages.push_back({{"role", "user"}, {"content", prompt}});
  ChatTemplateOptions o = ChatPromptBuilder::defaults_for(tok);
  o.add_generation_prompt = true;
  const ChatPrompt chat = ChatPromptBuilder(tmpl, tok).build(messages, nullptr, o);
  std::vector<int32_t> ids = parse_special ? tok.encode(chat.text, false, true) : chat.ids;
  // The template writes BOS itself when the model wants one; add it only where it did not.
  if (!no_bos && tok.vocab().add_bos && tok.bos() >= 0 && (ids.empty() || ids.front() != tok.bos()))
    ids.insert(ids.begin(), tok.bos());
  return ids;
}

// "prefill 512/2000 tokens" rewritten in place on a terminal; erased when the prompt is done.
void show_prefill_progress(int n_done, int n_total) {
  if (n_done < n_total) std::fprintf(stderr, "\rprefill %d/%d tokens", n_done, n_total);
  else std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
}

}  // namespace

int cmd_run(int argc, char** argv) {
  CLI::App app{"Generate text from a prompt", "polykv run"};
  std::string model_path, prompt, ids_text, system_prompt, ctk = kDefaultCacheTypeK, ctv = kDefaultCacheTypeV;
  GenerateOptions opts;
  int threads = 0, n_ctx = 0;
  int64_t seed = int64_t(opts.sampling.seed);
  bool chat = false, no_bos = false, parse_special = false, echo = false;
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  RopeOverride rope;
  add_rope_options(app, rope);
  app.add_option("-p,--prompt", prompt, "prompt text");
  app.add_option("--ids", ids_text, "prompt as comma-separated token ids instead of text")->check(token_ids_check());
  int ubatch = 0;
  add_ubatch_option(app, ubatch);
  app.add_option("-n,--n-predict", opts.n_predict, "tokens to generate (-1: until the context is full)")
      ->check(CLI::Range(-1, 1 << 24));
  app.add_option("-c,--ctx-size", n_ctx, "context size in tokens (0: the model's training context)")
      ->check(CLI::Range(0, 1 << 24));
  add_threads_option(app, threads);
  app.add_option("--temp", opts.sampling.temperature, "temperature >= 0 (0: greedy)")->capture_default_str();
  app.add_option("--top-k", opts.sampling.top_k, "top-k >= 0 (0: off)")->capture_default_str();
  app.add_option("--top-p", opts.sampling.top_p, "top-p in [0, 1] (1: off)")->capture_default_str();
  app.add_option("--min-p", opts.sampling.min_p, "min-p in [0, 1] (0: off)")->capture_default_str();
  app.add_option("--repeat-penalty", opts.sampling.repeat_penalty, "repetition penalty > 0 (1: off)")
      ->capture_default_str();
  app.add_option("--repeat-last-n", opts.sampling.repeat_last_n,
                 "tokens the penalty looks back over (0: none, -1: all)")->capture_default_str();
  app.add_option("-s,--seed", seed,
                 "random seed; the default is fixed, so runs repeat; -1: a random seed, printed on stderr")
      ->capture_default_str()->check(CLI::Range(int64_t(-1), INT64_MAX));
  app.add_flag("--chat", chat, "wrap the prompt in the model's chat template (as a user message)");
  app.add_option("--system", system_prompt, "system message (with --chat)");
  app.add_flag("--no-bos", no_bos, "do not add the BOS token the vocabulary asks for");
  app.add_flag("--parse-special", parse_special,
               "recognise control tokens written in the prompt (with --chat: in the user's text too)");
  app.add_flag("--echo", echo, "print the prompt as the model sees it (control tokens as text) first");
  app.add_option("--cache-type-k", ctk, kv_type_help("K"))->check(kv_k_type_check())->capture_default_str();
  app.add_option("--cache-type-v", ctv, kv_type_help("V"))->check(kv_v_type_check())->capture_default_str();
  float k_eq = 0;
  add_k_eq_option(app, k_eq);
  std::string device = "auto";
  add_device_option(app, device);
  bool batch_invariant = false;
  const CLI::Option* batch_invariant_opt = add_batch_invariant_option(app, batch_invariant);
  SpecCli spec;
  add_spec_options(app, spec);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  usage_check(prompt.empty() != ids_text.empty(), "give exactly one of -p/--prompt and --ids");
  check_spec_options(spec);
  batch_invariant = resolve_batch_invariant(batch_invariant_opt, batch_invariant, drafting_configured(spec));
  if (auto why = conflicting_options(!ids_text.empty(), chat, app.count("--system") > 0, no_bos, parse_special))
    throw UsageError(*why);
  opts.sampling.seed = seed >= 0 ? uint64_t(seed) : random_seed();
  try {
    validate(opts.sampling);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (seed < 0) std::fprintf(stderr, "seed: %llu (random; --seed %llu repeats this run)\n",
                             (unsigned long long)opts.sampling.seed, (unsigned long long)opts.sampling.seed);

  const std::unique_ptr<Backend> backend = make_backend({device, threads, batch_invariant});
  opts.prefill_chunk = resolve_ubatch(ubatch, *backend);
  auto model = Model::load(model_path, *backend, rope);
  const std::unique_ptr<Model> draft_model = load_draft_model(spec, *model, *backend, rope);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  std::vector<int32_t> ids;
  if (!ids_text.empty()) {
    ids = parse_ids(ids_text);
    for (int32_t id : ids) check(tok.valid(id), "token id ", id, " is outside the vocabulary");
  } else if (chat) {
    ids = chat_prompt_ids(*model, tok, prompt, system_prompt, no_bos, parse_special);
  } else {
    ids = tok.encode(prompt, !no_bos, parse_special);
  }

  const int n_ctx_train = model->config().n_ctx_train;
  const int ctx = n_ctx > 0 ? n_ctx : n_ctx_train;
  if (n_ctx_train > 0 && ctx > n_ctx_train)
    std::fprintf(stderr, "warning: -c %d exceeds the model's training context of %d\n", ctx, n_ctx_train);
  SequenceKvOptions kvo;
  kvo.k_type = ctk;
  kvo.v_type = ctv;
  kvo.max_tokens = ctx;
  kvo.k_eq = k_eq;
  kvo.rollback_tokens = spec.spec.enabled() ? spec.spec.resolved_n_max() + 1 : 0;  // rejected drafts roll back
  const std::unique_ptr<KvSequence> kv_seq = make_sequence_kv(*model, kvo);
  KvSequence& kv = *kv_seq;
  print_kv_summary(kv);
  const std::unique_ptr<Drafter> drafter = make_drafter(spec.spec, *model, draft_model.get(), ctx);
  opts.drafter = drafter.get();
  opts.spec_n_max = spec.spec.resolved_n_max();
  opts.spec_adaptive = spec.spec.adaptive();
  StreamingDecoder dec(tok);
  GenerateCallbacks cb;
  cb.is_eog = [&](int32_t id) { return tok.is_eog(id); };
  cb.on_token = [&](int32_t id) {
    const std::string piece = dec.push(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  // The echo comes once the prompt is in: on a terminal the progress line is then erased, and it
  // would otherwise erase the echo's last line with it.
  cb.on_prefill = [&, tty = isatty(fileno(stderr)) != 0](int n_done, int n_total) {
    if (tty) show_prefill_progress(n_done, n_total);
    if (echo && n_done == n_total) {
      const std::string shown = tok.decode(ids, /*render_special=*/true);
      std::fwrite(shown.data(), 1, shown.size(), stdout);
      std::fflush(stdout);
    }
  };
  const GenerateStats st = generate(*model, kv, ids, opts, cb);
  const std::string rest = dec.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::string why = stop_reason_text(st.stop_reason);
  if (st.stop_reason == StopReason::TokenLimit) why += " (-n " + std::to_string(opts.n_predict) + ")";
  if (st.stop_reason == StopReason::ContextFull) why += " (" + std::to_string(kv.max_tokens()) + " tokens)";
  std::fprintf(stderr, "\nprompt: %d tokens, %.1f tok/s | generated: %d tokens, %.1f tok/s | stopped: %s\n",
               st.n_prompt, st.n_prompt / std::max(1e-9, st.prefill_seconds), st.n_generated,
               st.n_generated / std::max(1e-9, st.decode_seconds), why.c_str());
  if (drafter)
    std::fprintf(stderr, "speculative (%s, n-max %d): %lld drafted, %lld accepted (%.1f%%), %.2f tokens per step\n",
                 drafter->name().c_str(), opts.spec_n_max, (long long)st.spec.drafted, (long long)st.spec.accepted,
                 100.0 * st.spec.acceptance_rate(), st.spec.tokens_per_step());
  return 0;
}

}  // namespace polykv::cli
