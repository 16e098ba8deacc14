// `polykv serve -m FILE [--host H] [--port P] [--parallel N] [--kv-memory MiB | -c TOKENS] [-ctk T -ctv T]
// [--api-key KEY] [-t THREADS]`: the OpenAI-compatible HTTP server (src/server/http_server.h).
// Logs go to stderr; the line "listening on http://HOST:PORT" says where it serves (with --port 0,
// on which free port). SIGINT/SIGTERM stop it gracefully (requests in flight are cancelled).
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "backend/backend.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/spec_options.h"
#include "core/error.h"
#include "engine/engine.h"
#include "kv/v_window.h"
#include "model/model.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace polykv::cli {

namespace {

struct ServeFlags {
  std::string model_path, chat_template_file;
  RopeOverride rope;
  int parallel = 4, max_queue = 64, threads = 0, kv_tokens = 0;
  int ubatch = 0;  // the engine's step budget (prompt rows + decodes); 0: the backend's
  int state_checkpoints = -1;  // hybrid models: the prefix cache's state checkpoints; -1: the engine's default
  double kv_memory_mib = 0;
  std::string ctk = kDefaultCacheTypeK, ctv = kDefaultCacheTypeV;
  SpecCli spec;                   // the default of requests that do not choose
  Model* draft_model = nullptr;   // --model-draft, loaded
};

// The engine: continuous batching of up to --parallel sequences over one shared KV pool of
// --kv-memory MiB or -c tokens (default: four contexts' worth). Large pool prefills report their
// progress on stderr (about every 10%).
std::unique_ptr<InferenceService> make_service(Model& model, const Tokenizer& tok, const ServeFlags& f,
                                               const std::string& model_id) {
  EngineOptions o;
  o.parallel = f.parallel;
  o.max_waiting = f.max_queue + f.parallel;  // the server's own limit (--max-queue) answers 503 first
  o.kv_memory_bytes = size_t(f.kv_memory_mib * 1048576.0);
  o.kv_tokens = f.kv_tokens;
  o.step_tokens = f.ubatch;
  o.state_checkpoints = f.state_checkpoints;
  o.k_type = f.ctk;
  o.v_type = f.ctv;
  o.model_id = model_id;
  o.spec = f.spec.spec;
  o.draft_model = f.draft_model;
  auto engine = std::make_unique<Engine>(
      model, [tok](int32_t id) { return tok.is_eog(id); }, o);
  // Called on the engine's step thread only; set here, before the server can create a pool.
  engine->on_pool_progress = [last = std::map<std::string, int>()](const std::string& pool, int done,
                                                                   int total) mutable {
    if (total < 1024) return;
    int& shown = last[pool];
    if (done < total && done - shown < total / 10) return;
    shown = done;
    std::fprintf(stderr, "pool '%s': prefilled %d / %d tokens (%.0f%%)\n", pool.c_str(), done, total,
                 100.0 * done / total);
    if (done >= total) last.erase(pool);
  };
  return engine;
}

// The engine's shared pool stores V in one plain type: a precision window (turbo3w) is a usage error.
void check_pool_v_type(const std::string& name) {
  const VCacheSpec v = parse_v_cache_spec(name);
  check(!v.window.enabled(), "the shared KV pool has no V precision window: use ", kv_type_name(v.type), ", not ",
        name);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(bool(in), "cannot open ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  CLI::App app{"Serve the model over HTTP (OpenAI-compatible API, named pools, metrics)", "polykv serve"};
  ServeFlags f;
  server::ServerOptions so;
  app.add_option("-m,--model", f.model_path, "GGUF model")->required();
  add_rope_options(app, f.rope);
  app.add_option("--host", so.host, "address to listen on")->capture_default_str();
  app.add_option("--port", so.port, "port (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--parallel", f.parallel, "sequences generated at once (continuous batching)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  add_ubatch_option(app, f.ubatch);
  app.add_option("--max-queue", f.max_queue, "requests waiting beyond --parallel before 503")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  auto* kv_mem =
      app.add_option("--kv-memory", f.kv_memory_mib,
                     "KV memory budget in MiB (hybrid models: with the recurrent states of --parallel sequences)")->check(CLI::Range(0.001, 1e9));
  auto* ctx = app.add_option("-c,--ctx-size", f.kv_tokens, "KV budget in tokens (0: four contexts' worth)")
                  ->check(CLI::Range(0, 1 << 26));
  kv_mem->excludes(ctx);
  app.add_option("--state-checkpoints", f.state_checkpoints,
                 "hybrid models (Gated DeltaNet): recurrent states kept at prompt block ends for automatic prefix "
                 "caching, in the KV memory (-1: 2 x --parallel, at most 1/8 of --kv-memory; 0: no automatic prefix "
                 "caching)")
      ->check(CLI::Range(-1, 1 << 20))
      ->capture_default_str();
  app.add_option("--cache-type-k", f.ctk, kv_type_help("K"))->check(kv_k_type_check())->capture_default_str();
  app.add_option("--cache-type-v", f.ctv,
                 "KV cache type for V (-ctv): " + kv_type_names() + " (the shared pool has no V precision window)")
      ->check(error_check(check_pool_v_type, "KV_TYPE_V"))
      ->capture_default_str();
  app.add_option("--api-key", so.api_key, "require Authorization: Bearer KEY (all routes but /health and /)");
  add_threads_option(app, f.threads, "-t,--threads", "compute threads (default: all cores)");
  app.add_option("--chat-template-file", f.chat_template_file, "Jinja chat template to use instead of the model's");
  app.add_flag("--log-requests", so.log_requests, "one line per HTTP request on stderr");
  std::string device = "auto";
  add_device_option(app, device);
  bool batch_invariant = false;
  const CLI::Option* batch_invariant_opt = add_batch_invariant_option(app, batch_invariant);
  add_spec_options(app, f.spec);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  check_spec_options(f.spec, /*serve=*/true);
  batch_invariant = resolve_batch_invariant(batch_invariant_opt, batch_invariant, drafting_configured(f.spec));

  // SIGINT/SIGTERM go to one thread that stops the server (below); every other thread must block
  // them. The backend's worker threads start now, so they start with the signals blocked (a thread
  // inherits its creator's mask); the model then loads with them unblocked (Ctrl-C stops a load).
  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
  std::unique_ptr<Backend> backend;
  try {
    backend = make_backend({device, f.threads, batch_invariant});
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  const std::unique_ptr<Model> model = Model::load(f.model_path, *backend, f.rope);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  const std::unique_ptr<Model> draft_model = load_draft_model(f.spec, *model, *backend, f.rope);
  f.draft_model = draft_model.get();
  check_mtp_head(f.spec, *model);  // a bad --model-mtp fails now, not at the first "mtp" request
  std::string tmpl = f.chat_template_file.empty() ? model->gguf().get_str("tokenizer.chat_template", "")
                                                  : read_text_file(f.chat_template_file);
  if (tmpl.empty()) std::fprintf(stderr, "polykv serve: the model has no chat template; chat uses a ChatML fallback\n");
  if (!backend->batch_invariant())
    std::fprintf(stderr, "polykv serve: %s is not batch invariant (no drafter configured): requests that ask for "
                 "\"spec\" speculate, but their greedy output may differ from plain decoding in near-ties; start with "
                 "--batch-invariant (or --spec) for bit-identical output\n", backend->describe().c_str());
  const std::string model_id = std::filesystem::path(f.model_path).stem().string();

  // Every thread started from here on (the service's, the server's) inherits the blocked mask.
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::unique_ptr<InferenceService> service = make_service(*model, tok, f, model_id);
  const ModelInfo info = service->model_info();
  so.max_in_flight = f.parallel + f.max_queue;
  so.pool_k_type = f.ctk;
  so.pool_v_type = f.ctv;
  server::HttpServer http(*service, tok, tmpl, so);
  const int port = http.bind();
  std::thread([&http, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::fprintf(stderr, "polykv serve: signal %d, stopping\n", sig);
    http.stop();
  }).detach();
  std::fprintf(stderr, "polykv serve: model %s, context %d tokens, KV %s / %s, up to %d requests in flight\n",
               info.id.c_str(), info.n_ctx, info.k_type.c_str(), info.v_type.c_str(), so.max_in_flight);
  std::fprintf(stderr, "polykv serve: listening on http://%s:%d\n", so.host.c_str(), port);
  std::fflush(stderr);
  http.run();
  return 0;
}

}  // namespace polykv::cli
