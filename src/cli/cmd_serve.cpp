// `polykv serve -m FILE [--host H] [--port P] [--parallel N] [--kv-memory MiB | -c TOKENS] [-ctk T -ctv T]
// [--api-key KEY] [-t THREADS]`: the OpenAI-compatible HTTP server (src/server/http_server.h).
// Logs go to stderr; the line "listening on http://HOST:PORT" says where it serves (with --port 0,
// on which free port). SIGINT/SIGTERM stop it gracefully (requests in flight are cancelled).
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "engine/sequential_service.h"
#include "model/model.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace polykv::cli {

namespace {

struct ServeFlags {
  std::string model_path, chat_template_file;
  int parallel = 4, max_queue = 64, threads = 0, n_ctx = 0;
  double kv_memory_mib = 0;
  std::string ctk = kDefaultCacheTypeK, ctv = kDefaultCacheTypeV;
};

// Context tokens of one sequence: -c, or what --kv-memory holds at the chosen KV types, capped by the
// model's training context.
int context_tokens(const Model& model, const ServeFlags& f) {
  const int train = model.config().n_ctx_train;
  if (f.n_ctx > 0) return f.n_ctx;
  if (f.kv_memory_mib > 0) {
    const size_t per_token = make_kv_cache(model.kv_shape(), f.ctk, f.ctv, 1).bytes_per_token();
    const double tokens = f.kv_memory_mib * 1048576.0 / double(per_token);
    check(tokens >= 2, "--kv-memory ", f.kv_memory_mib, " MiB holds fewer than 2 tokens (", per_token,
          " bytes per token)");
    return int(std::min<double>(tokens, train > 0 ? train : tokens));
  }
  return train;
}

// TEMPORARY (issue #8): one request at a time until the real Engine (continuous batching over the
// shared KV pool, engine/engine.h) replaces SequentialService here; --parallel then sizes its batch.
std::unique_ptr<InferenceService> make_service(std::shared_ptr<Model> model, const ServeFlags& f, int n_ctx,
                                               const std::string& model_id) {
  SequentialServiceOptions o;
  o.model_id = model_id;
  o.n_ctx = n_ctx;
  o.k_type = f.ctk;
  o.v_type = f.ctv;
  o.threads = f.threads;
  return std::make_unique<SequentialService>(std::move(model), o);
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
  app.add_option("--host", so.host, "address to listen on")->capture_default_str();
  app.add_option("--port", so.port, "port (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--parallel", f.parallel, "sequences generated at once")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--max-queue", f.max_queue, "requests waiting beyond --parallel before 503")
      ->check(CLI::Range(0, 100000))->capture_default_str();
  auto* kv_mem = app.add_option("--kv-memory", f.kv_memory_mib, "KV memory budget in MiB")->check(CLI::Range(0.001, 1e9));
  auto* ctx = app.add_option("-c,--ctx-size", f.n_ctx, "KV budget in tokens (0: the model's training context)")
                  ->check(CLI::Range(0, 1 << 26));
  kv_mem->excludes(ctx);
  app.add_option("--cache-type-k", f.ctk, kv_type_help("K"))->capture_default_str();
  app.add_option("--cache-type-v", f.ctv, kv_type_help("V"))->capture_default_str();
  app.add_option("--api-key", so.api_key, "require Authorization: Bearer KEY (all routes but /health and /)");
  app.add_option("-t,--threads", f.threads, "compute threads (0: all cores)")->check(CLI::Range(0, 1024));
  app.add_option("--chat-template-file", f.chat_template_file, "Jinja chat template to use instead of the model's");
  app.add_flag("--log-requests", so.log_requests, "one line per HTTP request on stderr");
  if (auto rc = parse_args(app, argc, argv)) return *rc;

  std::shared_ptr<Model> model = Model::load(f.model_path);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  std::string tmpl = f.chat_template_file.empty() ? model->gguf().get_str("tokenizer.chat_template", "")
                                                  : read_text_file(f.chat_template_file);
  if (tmpl.empty()) std::fprintf(stderr, "polykv serve: the model has no chat template; chat uses a ChatML fallback\n");
  const int n_ctx = context_tokens(*model, f);
  const std::string model_id = std::filesystem::path(f.model_path).stem().string();

  // SIGINT/SIGTERM go to one thread that stops the server; every other thread (the service's, the
  // server's) starts after this and inherits the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::unique_ptr<InferenceService> service = make_service(model, f, n_ctx, model_id);
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
