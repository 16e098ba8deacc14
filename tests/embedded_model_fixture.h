// The embedded model on a 2-thread CPU backend with its tokenizer: the fixture of the engine tests
// (plain and speculative).
#pragma once
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/generate.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace polykv::test {

struct EmbeddedModelFixture {
  CpuBackend backend{2};  // the engine steps on its threads
  std::unique_ptr<Model> model = Model::load(embedded_model(), backend);
  Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  std::vector<int32_t> encode(const std::string& s, bool bos) const { return tok.encode(s, bos, false); }
  // The first n tokens of the held-out code (fixtures' trained/ppl_dev.txt), BOS first.
  std::vector<int32_t> held_out(int n) const {
    std::ifstream f(fixtures_dir() + "/models/trained/ppl_dev.txt", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::vector<int32_t> ids = encode(ss.str().substr(0, 40000), true);
    EXPECT_GE(int(ids.size()), n);
    ids.resize(size_t(n));
    return ids;
  }
  std::function<bool(int32_t)> eog() const {
    return [this](int32_t id) { return tok.is_eog(id); };
  }
  // n greedy tokens after `prompt` with plain generate() on a private q8_0/turbo3t cache (the
  // reference of the engine tests); is_eog empty: exactly n tokens.
  std::vector<int32_t> plain_greedy(const std::vector<int32_t>& prompt, int n,
                                    std::function<bool(int32_t)> is_eog = {}) const {
    KvCache kv = make_kv_cache(model->kv_shape(), "q8_0", "turbo3t", 2048);
    std::vector<int32_t> out;
    GenerateOptions o;
    o.n_predict = n;
    o.sampling.temperature = 0;
    GenerateCallbacks cb;
    cb.on_token = [&](int32_t id) {
      out.push_back(id);
      return true;
    };
    cb.is_eog = std::move(is_eog);
    generate(*model, kv, prompt, o, cb);
    return out;
  }
};

}  // namespace polykv::test
