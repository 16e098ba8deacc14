// The qwen35 fixture (Gated DeltaNet hybrid, ../shared/fixtures/models/random) on a 2-thread CPU
// backend, with the reference's 48 token ids: shared by the hybrid state and engine tests.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "test_util.h"

namespace polykv::test {

struct Qwen35Fixture {
  static constexpr int kVocab = 8000;
  CpuBackend backend{2};
  std::unique_ptr<Model> model;
  std::vector<int32_t> ids;  // [48]
  Qwen35Fixture() {
    const std::string dir = fixtures_dir() + "/models/random";
    model = Model::load(dir + "/qwen35.gguf", backend);
    std::ifstream in(dir + "/qwen35.ref.json");
    ids = nlohmann::json::parse(in)["ref"]["ids"].get<std::vector<int32_t>>();
  }
};

}  // namespace polykv::test
