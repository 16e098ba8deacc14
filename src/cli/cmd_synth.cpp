// `polykv synth --shape NAME --type TYPE -o FILE [--seed N] [--layers N] [--threads N]`:
// writes a random-weight GGUF shaped like a real model (see model/synth.h).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/dtype.h"
#include "core/error.h"
#include "model/shapes.h"
#include "model/synth.h"

namespace polykv::cli {

int cmd_synth(int argc, char** argv) {
  std::string shapes_help = "model shape:";
  for (const auto& s : model_shapes()) shapes_help += " " + s.name;
  std::string types_help = "matrix type:";
  for (DType t : synth_types()) types_help += " " + std::string(dtype_name(t));
  types_help += "; or a weight mix (llama.cpp's file types of those names): " + weight_mix_names();

  CLI::App app{"Write a random-weight GGUF shaped like a real model", "polykv synth"};
  std::string shape_name, type_name, out;
  uint64_t seed = 0;
  int layers = 0, threads = 0;
  app.add_option("--shape", shape_name, shapes_help)
      ->check(error_check([](const std::string& s) { (void)find_model_shape(s); }, "SHAPE"))
      ->required();
  app.add_option("--type", type_name, types_help)
      ->check(error_check(
          [](const std::string& s) {
            SynthOptions o;
            set_synth_type(o, s);
          },
          "TYPE"))
      ->required();
  app.add_option("-o,--output", out, "output GGUF file")->required();
  app.add_option("--seed", seed, "random seed (same seed, same file)");
  app.add_option("--layers", layers, "number of blocks (default: the shape's)")->check(CLI::PositiveNumber);
  add_threads_option(app, threads, "--threads", "generator threads (default: all cores)");
  if (auto rc = parse_args(app, argc, argv)) return *rc;

  const ModelShape& shape = find_model_shape(shape_name);  // throws, listing the valid shapes
  SynthOptions opts;
  set_synth_type(opts, type_name);  // throws, listing the valid types and mixes
  opts.seed = seed;
  opts.n_layer = layers;
  opts.n_threads = threads;

  const auto t0 = std::chrono::steady_clock::now();
  write_synth_model(out, shape, opts);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "wrote %s: %s, %d layers, %s, seed %llu, %.1f s\n", out.c_str(), shape.name.c_str(),
               layers > 0 ? layers : shape.n_layer, opts.mix ? weight_mix_name(*opts.mix) : dtype_name(opts.type),
               (unsigned long long)seed, secs);
  return 0;
}

}  // namespace polykv::cli
