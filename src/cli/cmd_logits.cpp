// `polykv logits -m FILE --ids 1,2,3 -o OUT.f32`: float32 logits [n_tokens][n_vocab] of one forward
// pass over the ids, row-major, little-endian. Row t predicts token t + 1.
#include <cstdio>

#include "backend/backend.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "model/model.h"

namespace polykv::cli {

int cmd_logits(int argc, char** argv) {
  CLI::App app{"Write the logits of one forward pass over token ids", "polykv logits"};
  std::string model_path, ids_text, out_path, ctk = kDefaultCacheTypeK, ctv = kDefaultCacheTypeV;
  int threads = 0;
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  RopeOverride rope;
  add_rope_options(app, rope);
  app.add_option("--ids", ids_text, "comma-separated token ids")->check(token_ids_check())->required();
  app.add_option("-o,--output", out_path, "output file (float32 [n_tokens][n_vocab])")->required();
  add_threads_option(app, threads);
  app.add_option("--cache-type-k", ctk, kv_type_help("K"))->check(kv_k_type_check())->capture_default_str();
  app.add_option("--cache-type-v", ctv, kv_type_help("V"))->check(kv_v_type_check())->capture_default_str();
  float k_eq = 0;
  add_k_eq_option(app, k_eq);
  if (auto rc = parse_args(app, argc, argv)) return *rc;

  const std::vector<int32_t> ids = parse_ids(ids_text);
  check_not_input(out_path, model_path);  // the model stays mapped while the logits are written
  AtomicFileWriter out(out_path);          // fails now, not after the forward pass, if OUT can't be made
  const std::unique_ptr<Backend> backend = make_backend({"cpu", threads});
  auto model = Model::load(model_path, *backend, rope);
  const int n_vocab = model->config().n_vocab;
  const int n_ctx_train = model->config().n_ctx_train;  // the context here is the number of ids
  if (n_ctx_train > 0 && ids.size() > size_t(n_ctx_train))
    std::fprintf(stderr, "warning: %zu tokens exceed the model's training context of %d\n", ids.size(), n_ctx_train);
  KvCache kv = make_kv_cache(model->kv_shape(), ctk, ctv, int(ids.size()));
  apply_k_eq(*model, kv, k_eq);
  std::vector<float> logits(ids.size() * size_t(n_vocab));
  model->forward(ids, kv, logits.data(), true);

  out.write(logits.data(), logits.size() * sizeof(float));
  out.commit();
  std::fprintf(stderr, "wrote %zu x %d logits to %s\n", ids.size(), n_vocab, out_path.c_str());
  return 0;
}

}  // namespace polykv::cli
