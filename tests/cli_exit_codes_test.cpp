// The exit-code rule of every polykv command (README "Commands"), table-driven:
//   0  success (and --help, whose text goes to stdout);
//   2  usage error: the command line itself is wrong (unknown flag, bad flag value or argument, missing
//      required or conflicting options), knowable before any file is read. stdout stays empty and
//      stderr holds exactly two lines: "polykv VERB: error: WHAT" and "run `polykv VERB --help` for usage";
//   1  a well-formed command that fails: missing or corrupt input file, a token id outside the
//      model's vocabulary, a runtime failure. stderr names the problem ("polykv VERB: error: ...").
// Uses only the embedded model and files it writes itself (no fixtures).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace polykv {
namespace {

namespace fs = std::filesystem;

struct Row {
  const char* name;  // test name suffix
  const char* verb;  // as in the messages: "run", "eval ppl"
  const char* args;  // after the verb; {M} model, {BAD} corrupt GGUF, {TXT} text file, {TMP} temp dir, {CONV} messages
  int code;
  const char* err_has = "";  // stderr must contain it (besides the standard lines)
  const char* in = "";       // stdin
};

// clang-format off
const Row kRows[] = {
    // top level
    {"top_help", "", "--help", 0},
    {"top_none", "", "", 2},
    {"top_unknown", "", "frobnicate", 2, "frobnicate"},
    // run
    {"run_help", "run", "--help", 0},
    {"run_unknown_flag", "run", "-m {M} -p hi --no-such-flag", 2, "--no-such-flag"},
    {"run_bad_ctk", "run", "-m {M} -p hi -ctk foo", 2, "'foo'"},
    {"run_bad_ctk2", "run", "-m {M} -p hi -ctk q9_9", 2, "q9_9"},
    {"run_bad_ctv", "run", "-m {M} -p hi -ctv turbo9w", 2, "turbo9w"},
    {"run_ids_word", "run", "-m {M} --ids abc", 2, "'abc'"},
    {"run_ids_trailing_comma", "run", "-m {M} --ids 1,2,", 2, "item 3"},
    {"run_ids_leading_comma", "run", "-m {M} --ids ,1", 2, "item 1"},
    {"run_ids_double_comma", "run", "-m {M} --ids 1,,2", 2, "item 2"},
    {"run_ids_sign", "run", "-m {M} --ids +1", 2, "'+1'"},
    {"run_ids_negative", "run", "-m {M} --ids 5,-1", 2, "'-1'"},
    {"run_ids_overflow", "run", "-m {M} --ids 1,99999999999", 2, "too large"},
    {"run_ids_tab", "run", "-m {M} --ids '1,\t2'", 2, "tab"},
    {"run_ids_inner_space", "run", "-m {M} --ids '1 2'", 2, "'1 2'"},
    {"run_ids_blank", "run", "-m {M} --ids ' '", 2, "no token ids"},
    {"run_n_negative", "run", "-m {M} -p hi -n -5", 2, "-5"},
    {"run_n_word", "run", "-m {M} -p hi -n abc", 2, "abc"},
    {"run_both_prompts", "run", "-m {M} -p hi --ids 1", 2, "exactly one"},
    {"run_no_prompt", "run", "-m {M}", 2, "exactly one"},
    {"run_no_model", "run", "-p hi", 2, "--model"},
    {"run_k_eq_range", "run", "-m {M} -p hi --k-eq 2", 2, "--k-eq"},
    {"run_missing_model", "run", "-m /nonexistent.gguf -p hi", 1, "/nonexistent.gguf"},
    {"run_corrupt_model", "run", "-m {BAD} -p hi", 1},
    {"run_id_outside_vocab", "run", "-m {M} --ids 1,99999999 -n 1", 1, "vocabulary"},
    {"run_ids_spaced_ok", "run", "-m {M} --ids ' 1, 317 ,296' -n 2 -t 1", 0},
    {"run_n_until_full_ok", "run", "-m {M} -p hi -c 8 -n -1 -t 1", 0},
    {"run_rope_scaling_word", "run", "-m {M} -p hi --rope-scaling ntk", 2, "ntk"},
    {"run_rope_scale_range", "run", "-m {M} -p hi --rope-scale 0.5", 2, "--rope-scale"},
    {"run_rope_scale_without_kind", "run", "-m {M} -p hi -n 1 --rope-scale 2", 1, "--rope-scaling"},
    {"run_rope_yarn_ok", "run", "-m {M} -p hi -n 2 -t 1 --rope-scaling yarn --rope-scale 2", 0},
    // logits
    {"logits_help", "logits", "--help", 0},
    {"logits_ids_word", "logits", "-m {M} --ids 1,x -o {TMP}/l.f32", 2, "'x'"},
    {"logits_bad_ctk", "logits", "-m {M} --ids 1 -o {TMP}/l.f32 -ctk foo", 2, "'foo'"},
    {"logits_bad_threads", "logits", "-m {M} --ids 1 -o {TMP}/l.f32 -t -3", 2, "--threads"},
    {"logits_no_output", "logits", "-m {M} --ids 1", 2, "--output"},
    {"logits_missing_model", "logits", "-m /nonexistent.gguf --ids 1 -o {TMP}/l.f32", 1, "/nonexistent.gguf"},
    {"logits_id_outside_vocab", "logits", "-m {M} --ids 1,2,99999999 -o {TMP}/l.f32", 1, "out of range"},
    // eval
    {"eval_help", "eval", "--help", 0},
    {"eval_none", "eval", "", 2},
    {"eval_unknown", "eval", "frobnicate", 2, "frobnicate"},
    {"ppl_help", "eval ppl", "--help", 0},
    {"ppl_ctx_zero", "eval ppl", "-m {M} -f {TXT} -c 0", 2, "--ctx-size"},
    {"ppl_ctx_one", "eval ppl", "-m {M} -f {TXT} -c 1", 2, "--ctx-size"},
    {"ppl_bad_ctk", "eval ppl", "-m {M} -f {TXT} -ctk foo", 2, "'foo'"},
    {"ppl_bad_rows", "eval ppl", "-m {M} -f {TXT} --rows -1", 2, "--rows"},
    {"ppl_no_source", "eval ppl", "-m {M}", 2, "exactly one"},
    {"ppl_two_sources", "eval ppl", "-m {M} -f {TXT} --ids {TXT}", 2, "exactly one"},
    {"ppl_missing_text", "eval ppl", "-m {M} -f /nonexistent.txt -c 4", 1, "/nonexistent.txt"},
    {"ppl_missing_model", "eval ppl", "-m /nonexistent.gguf -f {TXT} -c 4", 1, "/nonexistent.gguf"},
    {"kld_help", "eval kld", "--help", 0},
    {"kld_no_test_types", "eval kld", "-m {M} -f {TXT}", 2, "required"},
    {"kld_bad_ref", "eval kld", "-m {M} -f {TXT} -ctk f16 -ctv f16 --ref-ctv nope", 2, "'nope'"},
    {"kld_missing_text", "eval kld", "-m {M} -f /nonexistent.txt -c 4 -ctk f16 -ctv f16", 1, "/nonexistent.txt"},
    {"needle_help", "eval needle", "--help", 0},
    {"needle_bad_ctv", "eval needle", "-m {M} --cases {TXT} -ctv foo", 2, "'foo'"},
    {"needle_bad_limit", "eval needle", "-m {M} --cases {TXT} --limit -1", 2, "--limit"},
    {"needle_missing_cases", "eval needle", "-m {M} --cases /nonexistent.jsonl", 1, "/nonexistent.jsonl"},
    // bench
    {"bench_help", "bench", "--help", 0},
    {"bench_bad_ctk", "bench", "-m {M} -ctk foo", 2, "'foo'"},
    {"bench_n_negative", "bench", "-m {M} -n -5", 2, "--n-gen"},
    {"bench_bad_threads", "bench", "-m x -t -3", 2, "--threads"},
    {"bench_bad_bandwidth", "bench", "-m {M} --bandwidth -1", 2, "--bandwidth"},
    {"bench_missing_model", "bench", "-m /nonexistent.gguf", 1, "/nonexistent.gguf"},
    // bench-agents
    {"bench_agents_help", "bench-agents", "--help", 0},
    {"bench_agents_bad_share", "bench-agents", "-m {M} --share maybe", 2, "--share"},
    {"bench_agents_bad_prefix_wait", "bench-agents", "-m {M} --prefix-wait maybe", 2, "--prefix-wait"},
    {"bench_agents_zero_agents", "bench-agents", "-m {M} --agents 4,0", 2, "--agents"},
    {"bench_agents_bad_ctv", "bench-agents", "-m {M} -ctv turbo9", 2, "'turbo9'"},
    {"bench_agents_missing_model", "bench-agents", "-m /nonexistent.gguf", 1, "/nonexistent.gguf"},
    // serve
    {"serve_help", "serve", "--help", 0},
    {"serve_no_model", "serve", "--port 0", 2, "--model"},
    {"serve_bad_port", "serve", "-m {M} --port 70000", 2, "--port"},
    {"serve_bad_ctk", "serve", "-m {M} -ctk foo", 2, "'foo'"},
    {"serve_bad_state_checkpoints", "serve", "-m {M} --state-checkpoints -2", 2, "--state-checkpoints"},
    {"serve_v_window", "serve", "-m {M} -ctv turbo3w", 2, "turbo3w"},
    {"serve_two_budgets", "serve", "-m {M} --kv-memory 64 -c 512", 2, "--kv-memory"},
    {"serve_missing_model", "serve", "-m /nonexistent.gguf --port 0", 1, "/nonexistent.gguf"},
    // quantize
    {"quantize_help", "quantize", "--help", 0},
    {"quantize_unsupported_type", "quantize", "{M} {TMP}/q.gguf q8_1", 2, "q8_1"},
    {"quantize_unknown_type", "quantize", "{M} {TMP}/q.gguf foo", 2, "'foo'"},
    {"quantize_bad_fallback", "quantize", "{M} {TMP}/q.gguf q8_0 --fallback q8_1", 2, "q8_1"},
    {"quantize_bad_threads", "quantize", "{M} {TMP}/q.gguf q8_0 -t -3", 2, "--threads"},
    {"quantize_no_type", "quantize", "{M} {TMP}/q.gguf", 2, "type"},
    {"quantize_missing_input", "quantize", "/nonexistent.gguf {TMP}/q.gguf q8_0", 1, "/nonexistent.gguf"},
    // inspect
    {"inspect_help", "inspect", "--help", 0},
    {"inspect_negative_items", "inspect", "{M} --array-items -1", 2, "--array-items"},
    {"inspect_word_items", "inspect", "{M} --array-items x", 2, "--array-items"},
    {"inspect_no_file", "inspect", "", 2, "file"},
    {"inspect_missing_file", "inspect", "/nonexistent.gguf", 1, "/nonexistent.gguf"},
    {"inspect_corrupt_file", "inspect", "{BAD}", 1},
    // synth
    {"synth_help", "synth", "--help", 0},
    {"synth_unknown_shape", "synth", "--shape nope --type q8_0 -o {TMP}/s.gguf", 2, "'nope'"},
    {"synth_unknown_type", "synth", "--shape tiny --type nope -o {TMP}/s.gguf", 2, "nope"},
    {"synth_zero_layers", "synth", "--shape tiny --type q8_0 --layers 0 -o {TMP}/s.gguf", 2, "--layers"},
    {"synth_unwritable", "synth", "--shape tiny --type q8_0 -o /nonexistent-dir/s.gguf", 1, "/nonexistent-dir"},
    // tokenize, detokenize, bench-tokenize
    {"tokenize_help", "tokenize", "--help", 0},
    {"tokenize_no_model", "tokenize", "", 2, "--model"},
    {"tokenize_model_no_value", "tokenize", "-m", 2, "-m"},
    {"tokenize_missing_model", "tokenize", "-m /nonexistent.gguf", 1, "/nonexistent.gguf", "hi"},
    {"detokenize_help", "detokenize", "--help", 0},
    {"detokenize_unknown_flag", "detokenize", "-m {M} --no-such-flag", 2, "--no-such-flag"},
    {"detokenize_missing_model", "detokenize", "-m /nonexistent.gguf", 1, "/nonexistent.gguf", "1 2"},
    {"detokenize_bad_stdin", "detokenize", "-m {M}", 1, "'x'", "1 x"},  // input data, not a flag
    {"bench_tokenize_help", "bench-tokenize", "--help", 0},
    {"bench_tokenize_zero_repeat", "bench-tokenize", "-m {M} -f {TXT} -r 0", 2, "--repeat"},
    {"bench_tokenize_no_file", "bench-tokenize", "-m {M}", 2, "--file"},
    {"bench_tokenize_missing_file", "bench-tokenize", "-m {M} -f /nonexistent.txt", 1, "/nonexistent.txt"},
    // template
    {"template_help", "template", "--help", 0},
    {"template_both_sources", "template", "-m {M} --template {TXT} --messages {CONV}", 2, "--template"},
    {"template_no_source", "template", "--messages {CONV}", 2, "exactly one"},
    {"template_missing_template", "template", "--template /nonexistent.jinja --messages {CONV}", 1,
     "/nonexistent.jinja"},
};
// clang-format on

// The files the table's placeholders name, made once per process.
struct Files {
  std::string tmp, bad, txt;
  Files() {
    tmp = fs::temp_directory_path() / ("polykv_exit_codes_" + std::to_string(::getpid()));
    fs::create_directories(tmp);
    bad = tmp + "/corrupt.gguf";  // the embedded model's first 5000 bytes
    std::ifstream in(test::embedded_model(), std::ios::binary);
    std::vector<char> head(5000);
    in.read(head.data(), std::streamsize(head.size()));
    std::ofstream(bad, std::ios::binary).write(head.data(), std::streamsize(head.size()));
    txt = tmp + "/text.txt";
    std::ofstream(txt) << "def add(a, b):\n    return a + b\n";
  }
  ~Files() { fs::remove_all(tmp); }
};

std::string expand(std::string s, const Files& f) {
  const std::pair<std::string, std::string> subs[] = {
      {"{M}", test::embedded_model()},
      {"{BAD}", f.bad},
      {"{TXT}", f.txt},
      {"{TMP}", f.tmp},
      {"{CONV}", std::string(POLYKV_SOURCE_DIR) + "/tests/data/chat/conversations/multi_turn.json"}};
  for (const auto& [key, value] : subs)
    for (size_t at; (at = s.find(key)) != std::string::npos;) s.replace(at, key.size(), value);
  return s;
}

class CliExitCodes : public ::testing::TestWithParam<Row> {};

TEST_P(CliExitCodes, FollowTheRule) {
  static const Files files;
  const Row& row = GetParam();
  const std::string verb = row.verb;
  const std::string args = expand((verb.empty() ? "" : verb + " ") + row.args, files);
  const test::CliStreams r = test::polykv_streams(args, row.in);
  SCOPED_TRACE("polykv " + args + "\nstdout: " + r.out + "\nstderr: " + r.err);
  EXPECT_EQ(r.code, row.code);
  EXPECT_NE(r.err.find(row.err_has), std::string::npos) << "stderr lacks '" << row.err_has << "'";
  if (row.code == 0 && std::string(row.args) == "--help") {
    EXPECT_NE(r.out.find("--help"), std::string::npos) << "help goes to stdout";
    EXPECT_EQ(r.err, "");
  }
  if (row.code == 2 && !verb.empty() && verb != "eval") {  // the subcommand-less forms print the list instead
    const std::string command = "polykv " + verb;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind(command + ": error: ", 0), 0u) << "first line";
    EXPECT_NE(r.err.find("\nrun `" + command + " --help` for usage\n"), std::string::npos) << "second line";
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << "exactly two lines";
  }
  if (row.code == 1) {
    EXPECT_NE(r.err.find("polykv " + verb + ": error: "), std::string::npos);
    EXPECT_EQ(r.err.find("internal error"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Cli, CliExitCodes, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<Row>& info) { return std::string(info.param.name); });

// Every command of `polykv --help` has rows for --help (0), a usage error (2) and a failure (1).
TEST(CliExitCodesTable, CoversEveryCommand) {
  const test::CliResult help = test::polykv("--help");
  ASSERT_EQ(help.code, 0);
  std::vector<std::string> verbs = {"eval ppl", "eval kld", "eval needle"};  // eval itself has no failure row
  for (size_t at = help.out.find("commands:\n"); (at = help.out.find("\n  ", at)) != std::string::npos;) {
    at += 3;
    verbs.push_back(help.out.substr(at, help.out.find(' ', at) - at));
  }
  ASSERT_GE(verbs.size(), 3u + 11u) << help.out;
  ASSERT_NE(std::find(verbs.begin(), verbs.end(), "eval"), verbs.end());
  for (const std::string& verb : verbs) {
    if (verb == "eval") continue;
    bool has[3] = {};
    for (const Row& row : kRows)
      if (verb == row.verb) has[row.code] = true;
    EXPECT_TRUE(has[0] && has[1] && has[2]) << verb << ": codes 0/1/2 covered: " << has[0] << has[1] << has[2];
  }
}

// --help of run, bench and eval states which KV types each defaults to (they differ on purpose).
TEST(CliHelp, StatesKvDefaults) {
  for (const char* verb : {"run", "bench", "logits"}) {
    const test::CliResult r = test::polykv(std::string(verb) + " --help");
    EXPECT_NE(r.out.find("Default q8_0 (eval defaults to f16"), std::string::npos) << verb << r.out;
    EXPECT_NE(r.out.find("Default turbo3t (eval defaults to f16"), std::string::npos) << verb << r.out;
  }
  for (const char* sub : {"ppl", "needle"}) {
    const test::CliResult r = test::polykv(std::string("eval ") + sub + " --help");
    EXPECT_NE(r.out.find("eval defaults to f16, a reference"), std::string::npos) << sub << r.out;
    EXPECT_NE(r.out.find("run, logits and bench default to turbo3t"), std::string::npos) << sub << r.out;
  }
}

}  // namespace
}  // namespace polykv
