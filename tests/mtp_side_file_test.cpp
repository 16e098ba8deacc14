// `--model-mtp FILE` checks the side file against the target before using it: copies of the trained
// head (models/polykv-code-26m-mtp-head-q8_0.gguf) with one thing wrong each must fail with exit 1 and
// an Error naming the file and the problem; the unchanged copy must work.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <unistd.h>  // getpid

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"

namespace polykv {
namespace {

const std::string kHead = std::string(POLYKV_SOURCE_DIR) + "/models/polykv-code-26m-mtp-head-q8_0.gguf";

// Copies kHead to `path`, letting `meta` edit the metadata and skipping/replacing tensors via `tensor`
// (returns false to drop a tensor; may change its ne, keeping the byte count).
void copy_head(const std::string& path, const std::function<void(GgufWriter&)>& meta,
               const std::function<bool(const GgufTensor&, std::vector<int64_t>&)>& tensor) {
  const GgufFile f = GgufFile::open(kHead);
  GgufWriter w;
  for (const auto& [k, v] : f.metadata())
    if (k != "general.alignment") w.set(k, v);
  meta(w);
  for (const GgufTensor& t : f.tensors()) {
    std::vector<int64_t> ne = t.ne;
    if (!tensor(t, ne)) continue;
    w.add_tensor(t.name, t.type, ne, t.data);
  }
  w.write(path);
}

struct Case {
  const char* what;
  std::function<void(GgufWriter&)> meta;
  std::function<bool(const GgufTensor&, std::vector<int64_t>&)> tensor;
  const char* expect;  // in the error message
};

TEST(MtpSideFile, MismatchesAreClearErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("polykv_mtp_side_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto keep_meta = [](GgufWriter&) {};
  const auto keep_tensor = [](const GgufTensor&, std::vector<int64_t>&) { return true; };
  const Case cases[] = {
      {"unchanged", keep_meta, keep_tensor, nullptr},
      {"embedding_length", [](GgufWriter& w) { w.set_u32("llama.embedding_length", 256); }, keep_tensor,
       "llama.embedding_length is 256"},
      {"block_count", [](GgufWriter& w) { w.set_u32("llama.block_count", 9); }, keep_tensor,
       "llama.block_count is 9"},
      {"architecture", [](GgufWriter& w) { w.set_str("general.architecture", "qwen35"); }, keep_tensor,
       "general.architecture is 'qwen35'"},
      {"no eh_proj", keep_meta,
       [](const GgufTensor& t, std::vector<int64_t>&) { return t.name != "blk.6.nextn.eh_proj.weight"; },
       "blk.6.nextn.eh_proj.weight"},
      {"misshaped attn_q", keep_meta,
       [](const GgufTensor& t, std::vector<int64_t>& ne) {
         if (t.name == "blk.6.attn_q.weight") {  // same bytes, rows twice as long
           ne[0] *= 2;
           ne[1] /= 2;
         }
         return true;
       },
       "blk.6.attn_q.weight"},
  };
  for (const Case& c : cases) {
    const std::string path = (dir / "head.gguf").string();
    copy_head(path, c.meta, c.tensor);
    const auto r = test::polykv_streams("run -m '" + test::embedded_model() +
                                        "' -n 8 --temp 0 -t 1 -p 'x = ' --spec mtp --model-mtp '" + path + "'");
    if (!c.expect) {
      EXPECT_EQ(r.code, 0) << c.what << ": " << r.err;
      continue;
    }
    EXPECT_EQ(r.code, 1) << c.what << ": " << r.err;
    EXPECT_NE(r.err.find("MTP head " + path), std::string::npos) << c.what << ": " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.what << ": " << r.err;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace polykv
