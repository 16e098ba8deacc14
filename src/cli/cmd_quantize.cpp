// `polykv quantize IN.gguf OUT.gguf TYPE`: re-quantize a model's weight matrices.
#include <cstdio>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "quant/quant.h"
#include "quant/quantize_model.h"
#include "quant/weight_mix.h"

namespace polykv::cli {

int cmd_quantize(int argc, char** argv) {
  CLI::App app{"Re-quantize a GGUF model's weight matrices", "polykv quantize"};
  std::string in, out, type_name, fallback_name = "q8_0";
  int threads = 0;
  app.add_option("input", in, "input GGUF")->required();
  app.add_option("output", out, "output GGUF")->required();
  app.add_option("type", type_name,
                 "target type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, tq1_0, tq2_0, "
                 "ptq1_0, mxfp4 (experts mxfp4, other matrices q8_0: llama.cpp's MXFP4_MOE), or a weight mix: "
                 "q4_K_M, q5_K_M (llama.cpp's file types of those names: q4_K / q5_K, q6_K for the output and "
                 "for attention V and FFN down in some layers)")
      ->check(quantize_type_check(/*with_mixes=*/true))
      ->required();
  app.add_option("--fallback", fallback_name, "type for matrices whose rows don't fit TYPE's blocks")
      ->check(quantize_type_check());
  add_threads_option(app, threads);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  const auto mix = weight_mix_from_name(type_name);
  const QuantizeReport r = mix ? quantize_model(in, out, *mix, threads)
                               : quantize_model(in, out, dtype_from_name(type_name), dtype_from_name(fallback_name),
                                                threads);
  std::printf("%s: %d matrices as %s, %d in fallback type, %d tensors copied; %.1f MiB -> %.1f MiB\n", out.c_str(),
              r.n_quantized, mix ? "the mix chose" : type_name.c_str(), r.n_fallback, r.n_kept,
              double(r.bytes_in) / 1048576.0, double(r.bytes_out) / 1048576.0);
  return 0;
}

}  // namespace polykv::cli
