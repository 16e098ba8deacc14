// Output files and input paths: outputs are written atomically (a failed write leaves the old file
// and no temporary), an output that is an input (same path, hard link, symlink) is refused before
// anything is written, a FIFO or folder as the model is refused at once instead of hanging, and text
// from a file is escaped in error messages (a NUL no longer cuts them short).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/printable.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "hardening_util.h"
#include "test_util.h"

namespace polykv {
namespace {

namespace fs = std::filesystem;
using test::ScratchDir;
using test::shell;
using test::slurp;
using test::spit;

// Names in the folder that look like AtomicFileWriter's temporaries.
std::vector<std::string> temporaries(const ScratchDir& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
  return out;
}

TEST(AtomicFile, OldContentsUntilCommitThenNewOnesAndNoTemporary) {
  ScratchDir dir("atomic_commit");
  const std::string path = dir / "out.bin";
  spit(path, "old contents");
  ::chmod(path.c_str(), 0640);
  {
    AtomicFileWriter w(path);
    w.write("new", 3);
    EXPECT_EQ(slurp(path), "old contents");
    EXPECT_EQ(temporaries(dir).size(), 1u);
    w.commit();
  }
  EXPECT_EQ(slurp(path), "new");
  EXPECT_TRUE(temporaries(dir).empty());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u) << "a replaced file keeps its permissions";

  {
    AtomicFileWriter w(path);
    w.write("abandoned", 9);
  }  // no commit: as if an error had been thrown
  EXPECT_EQ(slurp(path), "new");
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(AtomicFile, GgufWriteThatFailsMidwayLeavesTheOldFile) {
  ScratchDir dir("atomic_gguf");
  const std::string path = dir / "model.gguf";
  spit(path, "the previous model");
  GgufWriter w;
  w.set_str("general.architecture", "llama");
  std::vector<float> ok(64, 1.0f);
  w.add_tensor("a", DType::F32, {64}, ok.data());
  w.add_tensor("b", DType::F32, {64}, [](uint8_t*, size_t) { fail("generator failed"); });
  EXPECT_THROW(w.write(path), Error);
  EXPECT_EQ(slurp(path), "the previous model");
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(AtomicFile, SymlinkedOutputReplacesTheTargetAndKeepsTheLink) {
  ScratchDir dir("atomic_link");
  const std::string target = dir / "target.bin", link = dir / "link.bin";
  spit(target, "old");
  fs::create_symlink(target, link);
  AtomicFileWriter w(link);
  w.write("new", 3);
  w.commit();
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(slurp(target), "new");
}

TEST(AtomicFile, DeviceOutputIsWrittenInPlace) {
  AtomicFileWriter w("/dev/null");
  w.write("x", 1);
  w.commit();
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(AtomicFile, MissingFolderIsAnError) {
  EXPECT_THROW(AtomicFileWriter("/nonexistent-polykv-dir/out.bin"), Error);
}

TEST(AtomicFile, SameFileSeesThroughHardLinksAndSymlinks) {
  ScratchDir dir("same_file");
  const std::string a = dir / "a", b = dir / "b", hard = dir / "hard", sym = dir / "sym";
  spit(a, "1");
  spit(b, "1");
  fs::create_hard_link(a, hard);
  fs::create_symlink(a, sym);
  EXPECT_TRUE(same_file(a, a));
  EXPECT_TRUE(same_file(a, hard));
  EXPECT_TRUE(same_file(sym, a));
  EXPECT_TRUE(same_file(a, dir / "." + std::string("/a")));
  EXPECT_FALSE(same_file(a, b));
  EXPECT_FALSE(same_file(a, dir / "missing"));
  EXPECT_THROW(check_not_input(sym, a), Error);
  EXPECT_NO_THROW(check_not_input(b, a));
}

// quantize and logits with the output = the input (path, hard link, symlink): exit 1, a clear message,
// the model unchanged (it used to be truncated while mapped: SIGBUS and a destroyed model).
TEST(CliOutputs, OutputThatIsTheInputIsRefusedAndTheModelSurvives) {
  ScratchDir dir("cli_same");
  const std::string model = dir / "m.gguf", hard = dir / "hard.gguf", sym = dir / "sym.gguf";
  fs::copy_file(test::embedded_model(), model);
  fs::create_hard_link(model, hard);
  fs::create_symlink(model, sym);
  const std::string original = slurp(test::embedded_model());
  for (const std::string& out : {model, hard, sym}) {
    test::CliResult r = test::polykv("quantize " + model + " " + out + " q4_0");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("is the input file"), std::string::npos) << r.out;
    r = test::polykv("logits -m " + model + " --ids 1,2 -o " + out);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("is the input file"), std::string::npos) << r.out;
    ASSERT_EQ(slurp(model), original) << "the model was changed by writing to " << out;
  }
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(CliOutputs, QuantizeReplacesAnExistingOutputWhole) {
  ScratchDir dir("cli_replace");
  const std::string out = dir / "q.gguf";
  spit(out, std::string(40 << 20, 'x'));  // larger than the result: a stale tail would remain
  const test::CliResult r = test::polykv("quantize " + test::embedded_model() + " " + out + " q4_0");
  ASSERT_EQ(r.code, 0) << r.out;
  const GgufFile f = GgufFile::open(out);
  EXPECT_EQ(f.file_size(), fs::file_size(out));
  EXPECT_LT(fs::file_size(out), size_t(40 << 20));
  EXPECT_TRUE(temporaries(dir).empty());
}

// A FIFO used to block open() forever; a folder is refused too. `timeout` keeps a regression from
// hanging the suite (it would exit 124).
TEST(CliInputs, FifoOrFolderAsModelIsRefusedAtOnce) {
  ScratchDir dir("cli_fifo");
  const std::string fifo = dir / "model.gguf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& cmd : {"inspect " + fifo, "run -m " + fifo + " -p hi -n 1",
                                 "quantize " + fifo + " " + (dir / "out.gguf") + " q8_0"}) {
    const test::CliResult r = shell("timeout 10 \"$POLYKV\" " + cmd);
    EXPECT_EQ(r.code, 1) << cmd << ": " << r.out;
    EXPECT_NE(r.out.find("is a FIFO, not a regular file"), std::string::npos) << r.out;
  }
  const test::CliResult r = shell("timeout 10 \"$POLYKV\" inspect " + dir.path().string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("is a directory"), std::string::npos) << r.out;
}

TEST(Printable, EscapesControlBytesAndBadUtf8KeepsText) {
  using namespace std::string_literals;
  EXPECT_EQ(printable("blk.0.attn_q.weight").str(), "blk.0.attn_q.weight");
  EXPECT_EQ(printable("a\0b\x1b[2J\x7f"s).str(), "a\\x00b\\x1b[2J\\x7f");
  EXPECT_EQ(printable("\xe2\x96\x81the \xc3\xa9t\xc3\xa9").str(), "\xe2\x96\x81the \xc3\xa9t\xc3\xa9");  // ▁the été
  EXPECT_EQ(printable("\xff\xc3").str(), "\\xff\\xc3");      // invalid, truncated sequence
  EXPECT_EQ(printable("\xc2\x85").str(), "\\xc2\\x85");      // U+0085, a C1 control
  EXPECT_EQ(printable("\xc0\xaf").str(), "\\xc0\\xaf");      // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80").str(), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable(std::string(300, 'k'), 10).str(), std::string(10, 'k') + "\xe2\x80\xa6(300 bytes)");
  EXPECT_EQ(cat("x", printable("\n"), "y"), "x\\x0ay");
}

// A truncated GGUF whose tensor name holds a NUL and a terminal escape.
std::vector<uint8_t> truncated_gguf_with_bad_name(const std::string& name) {
  GgufWriter w;
  w.set_str("general.architecture", "llama");
  std::vector<float> data(64, 0.5f);
  w.add_tensor(name, DType::F32, {64}, data.data());
  std::vector<uint8_t> bytes = w.to_bytes();
  bytes.resize(bytes.size() - 128);  // cut into the tensor's data
  return bytes;
}

TEST(Printable, GgufErrorsEscapeNamesFromTheFile) {
  using namespace std::string_literals;
  const std::string name = "tok\0\x1b[2Jtail"s;
  const std::vector<uint8_t> bytes = truncated_gguf_with_bad_name(name);
  try {
    GgufFile::parse(bytes.data(), bytes.size());
    FAIL() << "a truncated file parsed";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(std::strlen(e.what()), msg.size()) << "no NUL in the message";
    EXPECT_NE(msg.find("'tok\\x00\\x1b[2Jtail'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("runs past the end"), std::string::npos) << msg;
  }
  // Through the CLI: the message used to end at the NUL.
  ScratchDir dir("printable_cli");
  const std::string path = dir / "bad.gguf";
  spit(path, std::string(bytes.begin(), bytes.end()));
  const test::CliResult r = test::polykv("inspect " + path);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("\\x00\\x1b[2Jtail' ("), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;

  // A 100 000-byte key is cut short in the message.
  GgufWriter w;
  w.set_f32_array(std::string(100000, 'k'), {1, 2, 3, 4});
  std::vector<uint8_t> big = w.to_bytes();
  big.resize(big.size() - 4);  // the array's last element is missing
  try {
    GgufFile::parse(big.data(), big.size());
    FAIL() << "a truncated file parsed";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_LT(msg.size(), 1000u) << msg.substr(0, 300);
    EXPECT_NE(msg.find("\xe2\x80\xa6(100000 bytes)': array of 4 elements"), std::string::npos) << msg.substr(0, 300);
  }
}

}  // namespace
}  // namespace polykv
