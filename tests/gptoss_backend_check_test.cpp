// check_backend_runs (model/moe_ffn.h): gpt-oss attention (attention sinks, YaRN frequencies and
// attention factor, output bias, alternating sliding window) is no reason to refuse a device backend
// any more (the CUDA attention kernels take AttentionParams::sinks); mixture-of-experts still is
// until a device backend has the MoE ops.
#include <gtest/gtest.h>

#include "backend_test_util.h"
#include "core/error.h"
#include "model/config.h"
#include "model/moe_ffn.h"

namespace polykv {
namespace {

ModelConfig oss_attention_config() {
  ModelConfig c;
  c.arch = "gpt-oss";
  c.attn_sinks = true;
  c.o_bias = true;
  c.qkv_bias = true;
  c.sliding_window = 128;
  c.rope_freq_divisors = {1.0f, 2.0f, 32.0f};
  return c;
}

TEST(GptOssBackendCheck, DeviceBackendRunsItsAttention) {
  test::CountingBackend cuda_like(1, DeviceKind::Cuda);
  EXPECT_NO_THROW(check_backend_runs(oss_attention_config(), cuda_like));
  test::CountingBackend cpu(1, DeviceKind::Cpu);
  EXPECT_NO_THROW(check_backend_runs(oss_attention_config(), cpu));
}

}  // namespace
}  // namespace polykv
