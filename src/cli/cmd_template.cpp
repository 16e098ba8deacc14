// `polykv template (-m FILE | --template FILE.jinja) --messages FILE.json [--add-generation-prompt]
// [--bos TEXT --eos TEXT] [--tools FILE.json]`: print the prompt a chat template renders.
// The messages file holds a JSON array of messages, or an object {"messages": [...], "tools": [...]}.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "chat/chat_input.h"
#include "chat/chat_template.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace polykv::cli {
namespace {

// The whole file. A directory is refused by name: std::ifstream opens one happily and reads nothing,
// which used to render an empty template and exit 0.
std::string read_text(const std::string& path) {
  std::error_code ec;
  check(!std::filesystem::is_directory(path, ec), "'", path, "' is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open '", path, "'");
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  check(!in.bad(), "cannot read '", path, "'");
  return text;
}

// Runs parse(text of path), naming the file in any error: "'x.json': messages JSON nested deeper ...".
template <typename Parse>
auto parse_file(const std::string& path, Parse&& parse) {
  const std::string text = read_text(path);
  try {
    return parse(text);
  } catch (const Error& e) {
    fail("'", path, "': ", e.what());
  }
}

}  // namespace

int cmd_template(int argc, char** argv) {
  CLI::App app{"Render a chat template for a conversation", "polykv template"};
  std::string model_path, template_path, messages_path, tools_path;
  std::optional<std::string> bos, eos;
  bool add_generation_prompt = false;
  auto* m = app.add_option("-m,--model", model_path, "GGUF model (its tokenizer.chat_template)");
  auto* t = app.add_option("--template", template_path, "Jinja template file");
  m->excludes(t);
  app.add_option("--messages", messages_path, "JSON file: array of messages or {messages, tools}")->required();
  app.add_option("--tools", tools_path, "JSON file: array of tool definitions");
  app.add_flag("--add-generation-prompt", add_generation_prompt, "end with the assistant turn's opening");
  app.add_option("--bos", bos, "bos_token text (default: the model's, else empty)");
  app.add_option("--eos", eos, "eos_token text (default: the model's, else empty)");
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  usage_check(model_path.empty() != template_path.empty(), "give exactly one of -m/--model and --template");

  ChatTemplateOptions opts;
  opts.add_generation_prompt = add_generation_prompt;
  std::string source;
  if (!model_path.empty()) {
    const GgufFile f = GgufFile::open(model_path);
    source = f.get_str("tokenizer.chat_template", "");
    check(!source.empty(), "'", model_path, "' has no tokenizer.chat_template; pass --template FILE.jinja");
    if (f.has("tokenizer.ggml.tokens")) {
      const Tokenizer tok = Tokenizer::from_gguf(f);
      if (tok.bos() >= 0) opts.bos_token = tok.piece(tok.bos());
      if (tok.eos() >= 0) opts.eos_token = tok.piece(tok.eos());
    }
  } else {
    source = read_text(template_path);
  }
  if (bos) opts.bos_token = *bos;
  if (eos) opts.eos_token = *eos;

  ChatInput input = parse_file(messages_path, [](const std::string& text) { return parse_chat_input(text); });
  if (!tools_path.empty())
    input.tools = parse_file(tools_path, [](const std::string& text) {
      return parse_json_limited<nlohmann::ordered_json>(text, kMaxJsonDepth, "tools");
    });
  const std::string out = render_chat_template(source, input.messages, input.tools, opts);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace polykv::cli
