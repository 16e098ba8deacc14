// The drafters trained for the embedded model (tools/train_draft.py, docs/MTP.md "Trained models"):
// the MTP head as a side file (--model-mtp models/polykv-code-26m-mtp-head-q8_0.gguf) and the draft
// model (--model-draft models/polykv-draft-q8_0.gguf). Greedy output with them equals greedy output
// without speculation for --spec-n-max 1..4; the trained head's drafts are accepted on held-out Python
// (a random head would score ~0); a file that is not a head for this model is a clear error (exit 1).
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>

#include "test_util.h"

namespace polykv {
namespace {

std::string model_file(const char* name) { return std::string(POLYKV_SOURCE_DIR) + "/models/" + name; }
const std::string kHead = model_file("polykv-code-26m-mtp-head-q8_0.gguf");
const std::string kDraft = model_file("polykv-draft-q8_0.gguf");

const char* const kPrompts[] = {"def fibonacci(n):\n    ", "import os\nimport sys\n\n", "class Config:\n    \"\"\""};

std::string base_cmd(const std::string& prompt, int n) {
  return "run -m '" + test::embedded_model() + "' -n " + std::to_string(n) + " --temp 0 -t 2 -c 512 -p '" + prompt + "'";
}

void expect_greedy_identity(const std::string& spec_args) {
  for (const char* p : kPrompts) {
    const auto plain = test::polykv_streams(base_cmd(p, 40));
    ASSERT_EQ(plain.code, 0) << plain.err;
    for (int k = 1; k <= 4; ++k) {
      const auto spec = test::polykv_streams(base_cmd(p, 40) + " " + spec_args + " --spec-n-max " + std::to_string(k));
      ASSERT_EQ(spec.code, 0) << spec.err;
      EXPECT_EQ(spec.out, plain.out) << spec_args << ", prompt '" << p << "', --spec-n-max " << k;
    }
  }
}

// The acceptance rate (percent) from run's stderr summary line "... accepted (X%) ...".
double acceptance_percent(const std::string& err) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex(R"(accepted \(([0-9.]+)%\))"))) return -1;
  return std::stod(m[1].str());
}

TEST(TrainedDrafters, MtpHeadSideFileGreedyIdentity) { expect_greedy_identity("--spec mtp --model-mtp '" + kHead + "'"); }

TEST(TrainedDrafters, DraftModelGreedyIdentity) { expect_greedy_identity("--spec draft --model-draft '" + kDraft + "'"); }

// n-gram first, the model where the context has no match (engine/spec/hybrid_drafter.h).
TEST(TrainedDrafters, HybridGreedyIdentity) {
  expect_greedy_identity("--spec ngram+mtp --model-mtp '" + kHead + "'");
  expect_greedy_identity("--spec ngram+draft --model-draft '" + kDraft + "'");
}

TEST(TrainedDrafters, MtpHeadAcceptsOnHeldOutPython) {
  // Held-out code (not in tools/train_draft.py's data: written for this test).
  const std::string prompt =
      "def merge_intervals(intervals):\n    \"\"\"Merge overlapping intervals.\"\"\"\n"
      "    intervals = sorted(intervals)\n    result = []\n    for start, end in intervals:\n        ";
  for (const char* spec : {"--spec mtp --model-mtp '", "--spec draft --model-draft '"}) {
    const std::string file = std::string(spec).find("mtp") != std::string::npos ? kHead : kDraft;
    const auto r = test::polykv_streams(base_cmd(prompt, 64) + " " + spec + file + "' --spec-n-max 3");
    ASSERT_EQ(r.code, 0) << r.err;
    const double acc = acceptance_percent(r.err);
    std::printf("%s: acceptance %.1f%% on held-out Python (n-max 3)\n", spec, acc);
    EXPECT_GT(acc, 0.0) << r.err;
  }
}

TEST(TrainedDrafters, MismatchedHeadFileIsAClearError) {
  // The draft model is a whole model without nextn layers: not a head for this target.
  const auto r = test::polykv_streams(base_cmd("x = ", 4) + " --spec mtp --model-mtp '" + kDraft + "'");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("MTP head"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nextn_predict_layers"), std::string::npos) << r.err;
  // A head given with another --spec is a usage error.
  const auto u = test::polykv_streams(base_cmd("x = ", 4) + " --spec ngram --model-mtp '" + kHead + "'");
  EXPECT_EQ(u.code, 2) << u.err;
  // No nextn layers and no --model-mtp: the existing error.
  const auto n = test::polykv_streams(base_cmd("x = ", 4) + " --spec mtp");
  EXPECT_EQ(n.code, 1) << n.err;
  EXPECT_NE(n.err.find("no MTP (nextn) layers"), std::string::npos) << n.err;
}

}  // namespace
}  // namespace polykv
