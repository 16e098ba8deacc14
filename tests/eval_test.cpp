// Tests of src/eval (perplexity, KL divergence, needle retrieval) on the trained fixture model,
// against values transformers computed (models/trained/top20_dev.bin, needle_dev.jsonl).
//
// Kept small for CI: one row of 256 tokens for perplexity, 128 tokens for KLD, three short needle cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "eval/distribution.h"
#include "eval/kld.h"
#include "eval/needle.h"
#include "eval/perplexity.h"
#include "eval/row_forward.h"
#include "eval/token_rows.h"
#include "model/model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace polykv {
namespace {

std::string trained_dir() { return test::fixtures_dir() + "/models/trained"; }

// One model for every test of the file (loading it is cheap, but there is no need to repeat it).
Model& trained_model() {
  static CpuBackend backend(0);
  static std::unique_ptr<Model> m = Model::load(trained_dir() + "/trained_llama.gguf", backend);
  return *m;
}

// top20_dev.bin: "TOPK", uint32 version, n_seq, seq_len, k, vocab; int32 input_ids[n_seq][seq_len];
// int32 topk_ids[n_seq][seq_len][k]; float topk_logprob[n_seq][seq_len][k];
// float next_token_logprob[n_seq][seq_len] (log p(input_ids[t+1]); NaN at the last position).
struct Top20 {
  uint32_t n_seq = 0, seq_len = 0, k = 0, vocab = 0;
  std::vector<int32_t> input_ids;
  std::vector<float> next_token_logprob;
};

Top20 read_top20() {
  const std::vector<uint8_t> b = test::read_file(trained_dir() + "/top20_dev.bin");
  Top20 t;
  EXPECT_EQ(std::memcmp(b.data(), "TOPK", 4), 0);
  uint32_t hdr[5];
  std::memcpy(hdr, b.data() + 4, sizeof hdr);
  t.n_seq = hdr[1], t.seq_len = hdr[2], t.k = hdr[3], t.vocab = hdr[4];
  const size_t n = size_t(t.n_seq) * t.seq_len, nk = n * t.k;
  t.input_ids.resize(n);
  t.next_token_logprob.resize(n);
  std::memcpy(t.input_ids.data(), b.data() + 24, n * 4);
  std::memcpy(t.next_token_logprob.data(), b.data() + 24 + n * 4 + 2 * nk * 4, n * 4);
  EXPECT_EQ(b.size(), 24 + n * 4 + 2 * nk * 4 + n * 4);
  return t;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("polykv_eval_test_" + name)).string();
}

void write_bytes(const std::string& path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), std::streamsize(n));
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Per-position log-probs and the perplexity mean against transformers' next_token_logprob over the
// first 256 tokens of top20_dev's first sequence, read back through an .i32 file as `--ids` does.
TEST(EvalPpl, MatchesTransformersLogprobs) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  constexpr int kCtx = 256;
  const Top20 t20 = read_top20();
  ASSERT_GE(t20.seq_len, uint32_t(kCtx));
  const std::string ids_path = temp_path("top20_seq0.i32");
  write_bytes(ids_path, t20.input_ids.data(), kCtx * 4);
  const TokenRows rows = read_token_rows(ids_path, kCtx);
  ASSERT_EQ(rows.n_rows(), 1);

  RowForward fwd(trained_model(), {"f32", "f32"}, kCtx);
  const std::vector<double> ours = row_next_token_logprobs(fwd, rows.row(0), 512);
  ASSERT_EQ(ours.size(), size_t(kCtx - 1));
  double worst = 0, ref_sum = 0, our_sum = 0;
  for (int t = 0; t < kCtx - 1; ++t) {
    const double ref = t20.next_token_logprob[size_t(t)];
    worst = std::max(worst, std::abs(ours[size_t(t)] - ref));
    ref_sum += ref;
    our_sum += ours[size_t(t)];
  }
  std::printf("  max |dlogprob| vs transformers over %d positions: %.2e\n", kCtx - 1, worst);
  EXPECT_LE(worst, 1e-3);

  // Chunking must not change anything but rounding.
  const std::vector<double> chunked = row_next_token_logprobs(fwd, rows.row(0), 100);
  for (size_t t = 0; t < ours.size(); ++t) EXPECT_NEAR(chunked[t], ours[t], 1e-5) << "position " << t;

  const PplResult r = evaluate_perplexity(trained_model(), rows, {"f32", "f32"});
  EXPECT_EQ(r.n_rows, 1);
  EXPECT_EQ(r.n_scored, kCtx - 1);
  EXPECT_NEAR(r.nll_mean(), -our_sum / (kCtx - 1), 1e-12);  // the mean of exactly those positions
  EXPECT_NEAR(r.nll_mean(), -ref_sum / (kCtx - 1), 1e-4);
  EXPECT_NEAR(r.ppl(), std::exp(-ref_sum / (kCtx - 1)), 1e-3);
  std::printf("  nll mean %.6f (transformers %.6f), ppl %.5f\n", r.nll_mean(), -ref_sum / (kCtx - 1), r.ppl());
  std::filesystem::remove(ids_path);
}

TokenRows first_ppl_dev_tokens(int n) {
  const TokenRows all = read_token_rows(trained_dir() + "/ppl_dev_ids.i32", 2048);
  return split_into_rows(all.row(0).subspan(0, size_t(n)), n);
}

TEST(EvalKld, SameTypesGiveZeroDivergence) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const TokenRows rows = first_ppl_dev_tokens(128);
  KldOptions o;
  o.ref = {"f16", "f16"};
  o.test = {"f16", "f16"};
  o.chunk_tokens = 50;
  const KldResult r = evaluate_kld(trained_model(), rows, o);
  EXPECT_EQ(r.n_positions, 127);
  EXPECT_LE(r.mean_kld, 1e-12);
  EXPECT_LE(r.max_kld, 1e-12);
  EXPECT_LE(r.p95_tv, 1e-9);
  EXPECT_EQ(r.top1_agreement, 1.0);
  EXPECT_DOUBLE_EQ(r.ppl, r.ref_ppl);

  // f32 against f16 K/V: a real but small difference.
  o.test = {"f32", "f32"};
  const KldResult d = evaluate_kld(trained_model(), rows, o);
  std::printf("  f32 vs f16 KV: mean KLD %.3g, p95 TV %.3g, top-1 %.4f\n", d.mean_kld, d.p95_tv, d.top1_agreement);
  EXPECT_GT(d.mean_kld, 0.0);
  EXPECT_LT(d.mean_kld, 1e-3);
  EXPECT_NEAR(d.ppl, d.ref_ppl, 0.01 * d.ref_ppl);
}

TEST(EvalKld, DistributionMath) {
  const float a[3] = {0.f, 0.f, 0.f}, b[3] = {std::log(2.f), 0.f, 0.f};
  std::vector<double> la, lb;
  log_softmax(a, 3, la);
  log_softmax(b, 3, lb);
  const DistributionDiff d = compare_distributions(la, lb);  // p = 1/3 each, q = (1/2, 1/4, 1/4)
  EXPECT_NEAR(d.kl_nats, std::log(32.0 / 27.0) / 3, 1e-8);  // (1/3)(ln(2/3) + 2 ln(4/3)); float ln 2 input
  EXPECT_NEAR(d.total_variation, 1.0 / 6.0, 1e-8);
  EXPECT_EQ(argmax(b, 3), 0);
  std::vector<float> v = {5, 1, 4, 2, 3};
  EXPECT_EQ(percentile_nearest_rank(v, 0.95), 5.0);
  EXPECT_EQ(percentile_nearest_rank(v, 0.5), 3.0);
}

// Three cases transformers answered correctly, short haystacks to keep the test fast.
TEST(EvalNeedle, MatchesTransformersOnThreeCases) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  std::vector<NeedleCase> all = read_needle_cases(trained_dir() + "/needle_dev.jsonl");
  ASSERT_EQ(all.size(), 144u);
  std::vector<NeedleCase> picked;
  for (const NeedleCase& c : all)
    if (c.ref_correct.value_or(false) && c.variant.ends_with("_short") && picked.size() < 3) picked.push_back(c);
  ASSERT_EQ(picked.size(), 3u);
  const Tokenizer tok = Tokenizer::from_gguf(trained_model().gguf());
  const NeedleReport rep = evaluate_needle(trained_model(), tok, {"f32", "f32"}, picked);
  for (size_t i = 0; i < picked.size(); ++i)
    EXPECT_EQ(rep.outcomes[i].answer, *picked[i].ref_answer) << "case on line " << picked[i].line;
  EXPECT_EQ(rep.all.correct, 3);
  EXPECT_EQ(rep.same_answer_as_ref.correct, 3);
  EXPECT_EQ(rep.same_correct_as_ref.correct, 3);
}

TEST(EvalNeedle, AnswerExtraction) {
  EXPECT_EQ(needle_answer("abc12\"\n"), "abc12");
  EXPECT_EQ(needle_answer("abc\nde\"f"), "abc");
  EXPECT_EQ(needle_answer("abcdefghijkl"), "abcdefghijkl");
  EXPECT_EQ(needle_answer("\""), "");
}

TEST(EvalErrors, BadInputsGiveClearErrors) {
  const std::string bad_ids = temp_path("bad.i32");
  const int32_t ids[5] = {1, 2, 3, 4, 5};
  write_bytes(bad_ids, ids, sizeof ids);  // 20 bytes: not rows of 4 tokens
  EXPECT_NE(error_of([&] { read_token_rows(bad_ids, 4); }).find("not a multiple of 4 * ctx = 16"), std::string::npos);
  EXPECT_NE(error_of([&] { read_token_rows(bad_ids, 1); }).find("too small"), std::string::npos);
  EXPECT_NE(error_of([&] { read_token_rows(temp_path("missing.i32"), 4); }).find("cannot open"), std::string::npos);
  EXPECT_NE(error_of([&] { split_into_rows(std::vector<int32_t>{1, 2, 3}, 4); }).find("fewer than one row"),
            std::string::npos);
  TokenRows out_of_vocab = split_into_rows(std::vector<int32_t>{1, 9000}, 2);
  EXPECT_NE(error_of([&] { check_ids_in_vocab(out_of_vocab, 8000); }).find("outside the vocabulary"),
            std::string::npos);
  std::filesystem::remove(bad_ids);

  EXPECT_NE(error_of([&] { parse_needle_case("", 7); }).find("line 7: empty line"), std::string::npos);
  EXPECT_NE(error_of([&] { parse_needle_case("{\"expected\": \"ab\"", 3); })
                .find("line 3: needle case is not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_needle_case("{\"prompt\": \"x\"}", 2); }).find("missing field \"expected\""),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_needle_case("{\"expected\": \"ab\"}", 2); }).find("neither"), std::string::npos);
  EXPECT_NE(error_of([&] { parse_needle_case("{\"expected\": \"a\", \"prompt_ids\": [1, -2]}", 2); })
                .find("not a token id"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_needle_case("[1, 2]", 2); }).find("expected a JSON object"), std::string::npos);

  const std::string jsonl = temp_path("cases.jsonl");
  {
    std::ofstream out(jsonl);
    out << "{\"expected\": \"ab\", \"prompt\": \"x\"}\n\n{\"expected\": \"cd\", \"prompt\": \"y\"}\n";
  }
  EXPECT_NE(error_of([&] { read_needle_cases(jsonl); }).find("line 2: empty line"), std::string::npos);
  std::filesystem::remove(jsonl);
  EXPECT_NE(error_of([&] { read_needle_cases(temp_path("missing.jsonl")); }).find("cannot open"), std::string::npos);
  EXPECT_NE(error_of([&] { check_kv_types({"f16", "nope"}); }).find("nope"), std::string::npos);
}

// The command line reports a bad ids file as a runtime error (exit code 1) with the reason.
TEST(EvalErrors, CommandLineExitCodes) {
  const std::string bad_ids = temp_path("cli_bad.i32");
  const int32_t ids[3] = {1, 2, 3};
  write_bytes(bad_ids, ids, sizeof ids);
  const std::string err = temp_path("cli_err.txt");
  const std::string model = test::embedded_model();  // any model: the ids file is what fails
  const auto run = [&](const std::string& args) {
    const int rc = std::system((std::string(POLYKV_BINARY) + " eval " + args + " >/dev/null 2>" + err).c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  EXPECT_EQ(run("ppl -m " + model + " --ids " + bad_ids + " -c 2"), 1);
  const std::vector<uint8_t> msg = test::read_file(err);
  EXPECT_NE(std::string(msg.begin(), msg.end()).find("not a multiple"), std::string::npos);
  EXPECT_EQ(run("ppl -m " + model + " --ids " + bad_ids + " -c 1"), 2);  // usage errors: -c < 2,
  EXPECT_EQ(run("ppl -m " + model), 2);                                  // neither -f nor --ids
  EXPECT_EQ(run("kld -m " + model + " --ids " + bad_ids), 2);  // -ctk/-ctv are required
  EXPECT_EQ(run("frobnicate"), 2);
  std::filesystem::remove(bad_ids);
  std::filesystem::remove(err);
}

}  // namespace
}  // namespace polykv
