// `polykv template (-m FILE | --template FILE.jinja) --messages FILE.json [--add-generation-prompt]
// [--bos TEXT --eos TEXT] [--tools FILE.json]`: print the prompt a chat template renders.
// The messages file holds a JSON array of messages, or an object {"messages": [...], "tools": [...]}.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat/chat_template.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace polykv::cli {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json read_json(const std::string& path) {
  try {
    return nlohmann::ordered_json::parse(read_text(path));
  } catch (const nlohmann::json::exception& e) {
    fail("'", path, "' is not valid JSON: ", e.what());
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

  nlohmann::ordered_json doc = read_json(messages_path);
  nlohmann::ordered_json messages = doc, tools = nullptr;
  if (doc.is_object()) {
    check(doc.contains("messages"), "'", messages_path, "' has no \"messages\" array");
    messages = doc["messages"];
    if (doc.contains("tools")) tools = doc["tools"];
  }
  check(messages.is_array(), "messages must be a JSON array of {role, content} objects");
  if (!tools_path.empty()) tools = read_json(tools_path);
  const std::string out = render_chat_template(source, messages, tools, opts);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace polykv::cli
