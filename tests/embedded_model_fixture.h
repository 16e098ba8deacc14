// The embedded model on a 2-thread CPU backend with its tokenizer: the fixture of the engine tests
// (plain and speculative).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace polykv::test {

struct EmbeddedModelFixture {
  CpuBackend backend{2};  // the engine steps on its threads
  std::unique_ptr<Model> model = Model::load(embedded_model(), backend);
  Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  std::vector<int32_t> encode(const std::string& s, bool bos) const { return tok.encode(s, bos, false); }
  std::function<bool(int32_t)> eog() const {
    return [this](int32_t id) { return tok.is_eog(id); };
  }
};

}  // namespace polykv::test
