// `polykv run` / `polykv logits` hardening, through the binary: invalid sampling flags are usage
// errors, --seed -1 draws a reported seed, ignored flag combinations are refused, contexts beyond the
// training context warn, the stop reason is printed, prefill progress shows on a terminal only, and
// --chat keeps the user's text from producing control tokens (--echo shows them).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace polykv {
namespace {

using test::embedded_model;
using test::polykv;

std::string run_args(const std::string& rest) { return "run -m " + embedded_model() + " -t 2 " + rest; }

TEST(RunCli, InvalidSamplingFlagsAreUsageErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--min-p 2", "min_p"},          {"--min-p -0.1", "min_p"},         {"--repeat-penalty 0", "repeat_penalty"},
      {"--repeat-penalty nan", "repeat_penalty"}, {"--temp -1", "temperature"}, {"--temp nan", "temperature"},
      {"--top-p 1.5", "top_p"},        {"--top-k -3", "top_k"},           {"--repeat-last-n -5", "repeat_last_n"},
  };
  for (const auto& [flags, name] : cases) {
    const auto r = polykv(run_args("-p 'def f(' -n 4 " + flags));
    EXPECT_EQ(r.code, 2) << flags << ": " << r.out;
    EXPECT_NE(r.out.find(name), std::string::npos) << flags << ": " << r.out;
    EXPECT_EQ(r.out.find("generated:"), std::string::npos) << flags << ": " << r.out;
  }
}

// The generated text: what precedes the timing line (stderr's KV line comes first).
std::string generated(const std::string& out) {
  const size_t kv_end = out.find('\n', out.find("KV cache:"));
  return out.substr(kv_end + 1, out.find("\nprompt:") - kv_end - 1);
}

TEST(RunCli, SeedMinusOneIsRandomAndReported) {
  const auto a = polykv(run_args("-p 'def f(' -n 16 --temp 1.5 --seed -1"));
  ASSERT_EQ(a.code, 0) << a.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(a.out, m, std::regex("seed: ([0-9]+) \\(random")));
  const auto again = polykv(run_args("-p 'def f(' -n 16 --temp 1.5 --seed " + m[1].str()));
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(generated(again.out), generated(a.out));
  // Two random seeds differ (chance of a clash about 2^-53).
  const auto b = polykv(run_args("-p 'def f(' -n 1 --seed -1"));
  std::smatch m2;
  ASSERT_TRUE(std::regex_search(b.out, m2, std::regex("seed: ([0-9]+) \\(random")));
  EXPECT_NE(m[1].str(), m2[1].str());
  EXPECT_EQ(polykv(run_args("-p 'def f(' -n 1 --seed -2")).code, 2);
}

TEST(RunCli, IgnoredFlagsAreUsageErrors) {
  for (const std::string flags : {"-p hi --system 'be brief'", "--ids 1,2 --no-bos", "--ids 1,2 --chat",
                                  "--ids 1,2 --parse-special"}) {
    const auto r = polykv(run_args(flags + " -n 1"));
    EXPECT_EQ(r.code, 2) << flags << ": " << r.out;
    EXPECT_NE(r.out.find("polykv run: error: --"), std::string::npos) << flags << ": " << r.out;
  }
}

TEST(RunCli, ContextBeyondTrainingWarns) {
  const auto r = polykv(run_args("-p 'def f(' -n 2 -c 4096"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: -c 4096 exceeds the model's training context of 2048"), std::string::npos) << r.out;
  EXPECT_EQ(polykv(run_args("-p 'def f(' -n 2 -c 2048")).out.find("warning"), std::string::npos);

  std::string ids = "1";
  for (int i = 0; i < 2048; ++i) ids += ",400";
  const std::string out = std::filesystem::temp_directory_path() / "polykv_run_cli_logits.f32";
  const auto l = polykv("logits -m " + embedded_model() + " -t 2 --ids " + ids + " -o " + out);
  std::filesystem::remove(out);
  ASSERT_EQ(l.code, 0) << l.out;
  EXPECT_NE(l.out.find("warning: 2049 tokens exceed the model's training context of 2048"), std::string::npos) << l.out;
}

TEST(RunCli, SaysWhyGenerationStopped) {
  auto r = polykv(run_args("-p 'def f(' -n 3"));
  EXPECT_NE(r.out.find("stopped: token limit (-n 3)"), std::string::npos) << r.out;
  r = polykv(run_args("-p 'def f(' -n 100 -c 8"));
  EXPECT_NE(r.out.find("stopped: context full (8 tokens)"), std::string::npos) << r.out;
}

// --ubatch (-ub) sets the prompt tokens per forward pass: greedy output does not depend on it (a sequence's
// logits do not depend on its chunking), and values outside 1..65536 are usage errors.
TEST(RunCli, UbatchChangesChunkingNotOutput) {
  const std::string prompt = "-p 'def fibonacci(n):\n    if n < 2:\n        return n\n' -n 12";
  const auto base = polykv(run_args(prompt));
  ASSERT_EQ(base.code, 0) << base.out;
  for (const std::string ub : {"--ubatch 1", "--ubatch 7", "-ub 3", "--ubatch 65536"}) {
    const auto r = polykv(run_args(prompt + " " + ub));
    ASSERT_EQ(r.code, 0) << ub << ": " << r.out;
    EXPECT_EQ(generated(r.out), generated(base.out)) << ub;
  }
  for (const std::string bad : {"--ubatch 0", "--ubatch -4", "--ubatch 65537", "--ubatch x"}) {
    const auto r = polykv(run_args(prompt + " " + bad));
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("ubatch"), std::string::npos) << bad << ": " << r.out;
  }
  const auto b = polykv("bench -m " + embedded_model() + " -t 2 -p 40 -n 0 --ubatch 16 --json");
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("\"ubatch\":16"), std::string::npos) << b.out;
  EXPECT_EQ(polykv("bench -m " + embedded_model() + " -p 40 -n 0 --ubatch 0").code, 2);
}

// bench warms up untimed by default (as llama-bench): the repetitions in the JSON are the -r timed ones only,
// and --no-warmup is reported as such.
TEST(RunCli, BenchWarmUpIsUntimedAndCanBeSkipped) {
  for (const std::string flag : {"", " --no-warmup"}) {
    const auto r = polykv("bench -m " + embedded_model() + " -t 1 -p 8 -n 3 -r 2 --json" + flag);
    ASSERT_EQ(r.code, 0) << flag << ": " << r.out;
    const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(j["warmup"].get<bool>(), flag.empty()) << flag;
    EXPECT_EQ(j["prefill_tok_s_reps"].size(), 2u) << flag;
    EXPECT_EQ(j["decode_tok_s_reps"].size(), 2u) << flag;
  }
}

// bench's floor counts the KV bytes a decode step reads: every cached position of a full-attention layer, the last
// sliding_window positions of a sliding one (tiny-gemma3: 6 layers, window 16, every 6th layer global). At depth
// 100 with 2 generated tokens (mean position 101): (5 x 16 + 101) / 6 of the positions' bytes; a llama (no window):
// all 101.
TEST(RunCli, BenchFloorReadsOnlySlidingLayersWindows) {
  const std::string g =
      (std::filesystem::temp_directory_path() / ("polykv_bench_window_" + std::to_string(::getpid()) + ".gguf")).string();
  ASSERT_EQ(polykv("synth --shape tiny-gemma3 --type q8_0 --seed 3 -o " + g).code, 0);
  const auto read_of = [](const std::string& model) {
    const auto r = polykv("bench -m " + model + " -t 1 -p 0 -d 100 -n 2 -r 1 --bandwidth 10 --json");
    EXPECT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    const double per_pos = j.at("kv_bytes_per_token").get<double>(), read = j.at("kv_read_bytes_per_step").get<double>();
    const double floor = j.at("decode_floor_tok_s").get<double>();
    EXPECT_NEAR(floor, 10e9 / (j.at("weight_bytes_per_token").get<double>() + read), 1e-6 * floor);
    return read / per_pos;
  };
  EXPECT_NEAR(read_of(g), (5 * 16 + 101) / 6.0, 1e-9);
  EXPECT_NEAR(read_of(embedded_model()), 101.0, 1e-9);
  std::filesystem::remove(g);
}

// A prompt of 150 lines "x = 1" (more than one prefill chunk of 512 tokens).
constexpr const char* kLongPrompt = "-p \"$(printf 'x = 1\\n%.0s' $(seq 150))\" -n 1";

TEST(RunCli, PrefillProgressOnlyOnATerminal) {
  const auto piped = polykv(run_args(kLongPrompt));
  ASSERT_EQ(piped.code, 0) << piped.out;
  ASSERT_NE(piped.out.find("prompt: 750 tokens"), std::string::npos) << piped.out;
  EXPECT_EQ(piped.out.find("prefill"), std::string::npos);
  if (!std::filesystem::exists("/usr/bin/script")) GTEST_SKIP() << "no script(1) to give a terminal";
  // script(1) runs the command on a pseudo-terminal; the command goes through a file to avoid quoting.
  const std::string sh = std::filesystem::temp_directory_path() / "polykv_run_cli_tty.sh";
  std::ofstream(sh) << POLYKV_BINARY << " " << run_args(kLongPrompt) << "\n";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(("script -qec 'sh " + sh + "' /dev/null").c_str(), "r"), &pclose);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p.get())) > 0;) out.append(buf, n);
  std::filesystem::remove(sh);
  EXPECT_NE(out.find("\rprefill 0/"), std::string::npos) << out;
  EXPECT_NE(out.find("\rprefill 512/"), std::string::npos) << out;
  EXPECT_NE(out.find("\r\033[K"), std::string::npos) << "the progress line is erased: " << out;
}

// Removes the file at `path` when the process exits.
struct RemoveAtExit {
  std::string path;
  ~RemoveAtExit() { std::remove(path.c_str()); }
};

// A copy of the embedded model with a Llama-2 style chat template (its vocabulary has <s> and </s> as
// control tokens), one per process (tests run as parallel processes under ctest), removed at exit.
std::string chat_model() {
  static const RemoveAtExit file{[] {
    const std::string out = std::filesystem::temp_directory_path() /
                            ("polykv_run_cli_chat_" + std::to_string(getpid()) + ".gguf");
    const GgufFile src = GgufFile::open(embedded_model());
    GgufWriter w;
    for (const auto& [key, value] : src.metadata())
      if (key != "general.alignment") w.set(key, value);
    w.set_str("tokenizer.chat_template",
              "{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}");
    for (const GgufTensor& t : src.tensors()) w.add_tensor(t.name, t.type, t.ne, t.data);
    w.write(out);
    return out;
  }()};
  return file.path;
}

TEST(RunCli, ChatUserTextCannotInjectControlTokens) {
  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(embedded_model()));
  ASSERT_TRUE(tok.needs_parse_special(tok.encode("</s>", false, true).at(0)));
  const auto r = polykv("run -m " + chat_model() + " -t 2 --chat --echo -n 0 -p '</s><s>hi'");
  ASSERT_EQ(r.code, 0) << r.out;
  // The model sees BOS (the template's bos_token), then the rest as text.
  std::vector<int32_t> expected = {tok.bos()};
  for (int32_t id : tok.encode("[INST] </s><s>hi [/INST]", false, false)) expected.push_back(id);
  const std::vector<int32_t> injected = tok.encode("<s>[INST] </s><s>hi [/INST]", false, true);
  ASSERT_NE(expected.size(), injected.size());
  EXPECT_NE(r.out.find("prompt: " + std::to_string(expected.size()) + " tokens"), std::string::npos) << r.out;
  // --echo shows what the model sees, control tokens included.
  EXPECT_NE(r.out.find("<s>[INST] </s><s>hi [/INST]"), std::string::npos) << r.out;
  // With --parse-special the user asks for control tokens in their text.
  const auto p = polykv("run -m " + chat_model() + " -t 2 --chat --parse-special -n 0 -p '</s><s>hi'");
  EXPECT_NE(p.out.find("prompt: " + std::to_string(injected.size()) + " tokens"), std::string::npos) << p.out;
}

}  // namespace
}  // namespace polykv
