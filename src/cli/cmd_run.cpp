// `polykv run -m FILE -p TEXT [-n N] [sampling flags] [--chat]`: generate text, streamed to stdout.
// Timings go to stderr so stdout holds the generated text alone.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "engine/generate.h"
#include "model/model.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace polykv::cli {

int cmd_run(int argc, char** argv) {
  CLI::App app{"Generate text from a prompt", "polykv run"};
  std::string model_path, prompt, ids_text, system_prompt, ctk = kDefaultCacheTypeK, ctv = kDefaultCacheTypeV;
  GenerateOptions opts;
  int threads = 0, n_ctx = 0;
  bool chat = false, no_bos = false, parse_special = false, echo = false;
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  app.add_option("-p,--prompt", prompt, "prompt text");
  app.add_option("--ids", ids_text, "prompt as comma-separated token ids instead of text")->check(token_ids_check());
  app.add_option("-n,--n-predict", opts.n_predict, "tokens to generate (-1: until the context is full)")
      ->check(CLI::Range(-1, 1 << 24));
  app.add_option("-c,--ctx-size", n_ctx, "context size in tokens (0: the model's training context)")
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("-t,--threads", threads, "threads (0: all cores)")->check(CLI::Range(0, 1024));
  app.add_option("--temp", opts.sampling.temperature, "temperature (0: greedy)");
  app.add_option("--top-k", opts.sampling.top_k, "top-k (0: off)");
  app.add_option("--top-p", opts.sampling.top_p, "top-p (1: off)");
  app.add_option("--min-p", opts.sampling.min_p, "min-p (0: off)");
  app.add_option("--repeat-penalty", opts.sampling.repeat_penalty, "repetition penalty (1: off)");
  app.add_option("--repeat-last-n", opts.sampling.repeat_last_n, "tokens the penalty looks back over");
  app.add_option("-s,--seed", opts.sampling.seed, "random seed");
  app.add_flag("--chat", chat, "wrap the prompt in the model's chat template (as a user message)");
  app.add_option("--system", system_prompt, "system message (with --chat)");
  app.add_flag("--no-bos", no_bos, "do not add the BOS token the vocabulary asks for");
  app.add_flag("--parse-special", parse_special, "recognise special tokens written in the prompt");
  app.add_flag("--echo", echo, "print the prompt before the generated text");
  app.add_option("--cache-type-k", ctk, kv_type_help("K"))->check(kv_k_type_check())->capture_default_str();
  app.add_option("--cache-type-v", ctv, kv_type_help("V"))->check(kv_v_type_check())->capture_default_str();
  float k_eq = 0;
  add_k_eq_option(app, k_eq);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  usage_check(prompt.empty() != ids_text.empty(), "give exactly one of -p/--prompt and --ids");

  auto model = Model::load(model_path);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  std::vector<int32_t> ids;
  if (!ids_text.empty()) {
    ids = parse_ids(ids_text);
    for (int32_t id : ids) check(tok.valid(id), "token id ", id, " is outside the vocabulary");
  } else {
    std::string text = prompt;
    if (chat) {
      const std::string tmpl = model->gguf().get_str("tokenizer.chat_template", "");
      check(!tmpl.empty(), "the model has no chat template (tokenizer.chat_template); run without --chat");
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      if (!system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", system_prompt}});
      messages.push_back({{"role", "user"}, {"content", prompt}});
      ChatTemplateOptions o;
      o.add_generation_prompt = true;
      o.bos_token = tok.bos() >= 0 ? tok.piece(tok.bos()) : "";
      o.eos_token = tok.eos() >= 0 ? tok.piece(tok.eos()) : "";
      text = render_chat_template(tmpl, messages, nlohmann::ordered_json(nullptr), o);
      parse_special = true;  // the template writes the special tokens as text
      // The template writes BOS itself when the model wants one; don't add a second.
      if (tok.bos() >= 0 && text.rfind(o.bos_token, 0) == 0) no_bos = true;
    }
    ids = tok.encode(text, !no_bos, parse_special);
  }

  const int ctx = n_ctx > 0 ? n_ctx : model->config().n_ctx_train;
  KvCache kv = make_kv_cache(model->kv_shape(), ctk, ctv, ctx);
  apply_k_eq(*model, kv, k_eq);
  print_kv_summary(kv);
  ThreadPool pool(threads);
  if (echo) std::fputs(tok.decode(ids).c_str(), stdout);
  StreamingDecoder dec(tok);
  GenerateCallbacks cb;
  cb.is_eog = [&](int32_t id) { return tok.is_eog(id); };
  cb.on_token = [&](int32_t id) {
    const std::string piece = dec.push(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  const GenerateStats st = generate(*model, kv, ids, opts, cb, pool);
  const std::string rest = dec.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fprintf(stderr, "\nprompt: %d tokens, %.1f tok/s | generated: %d tokens, %.1f tok/s%s\n", st.n_prompt,
               st.n_prompt / std::max(1e-9, st.prefill_seconds), st.n_generated,
               st.n_generated / std::max(1e-9, st.decode_seconds), st.stopped_by_eog ? " (end of text)" : "");
  return 0;
}

}  // namespace polykv::cli
