// Thread counts: a thread that cannot be started is an Error (the started ones joined), not
// std::terminate; every command's -t/--threads takes 1..1024 (else exit 2) and warns above the
// hardware threads.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"
#include "hardening_util.h"
#include "test_util.h"

namespace polykv {
namespace {

using test::embedded_model;

// Bytes of address space this process uses now (/proc/self/statm: size in pages).
size_t address_space_bytes() {
  std::ifstream in("/proc/self/statm");
  size_t pages = 0;
  in >> pages;
  return pages * size_t(::sysconf(_SC_PAGESIZE));
}

// Run in a child: 256 MiB more address space than in use now, then 1000 threads (8 MiB stacks,
// 64 MiB malloc arenas): creation fails part way. Exit 3: the Error was caught.
[[noreturn]] void start_too_many_threads() {
  const rlim_t limit = address_space_bytes() + (rlim_t(256) << 20);
  const rlimit lim{limit, limit};
  ::setrlimit(RLIMIT_AS, &lim);
  try {
    ThreadPool pool(1000);
    std::fprintf(stderr, "all 1000 threads started\n");
    _exit(10);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    _exit(3);
  }
}

TEST(ThreadPoolLimits, ThreadThatCannotStartIsAnError) {
  // The old behavior was std::terminate (a joinable std::thread destroyed): SIGABRT, not exit 3.
  EXPECT_EXIT(start_too_many_threads(), testing::ExitedWithCode(3), "cannot start thread [0-9]+ of 1000");
}

TEST(ThreadPoolLimits, CliReportsThreadFailureWithExitOne) {
  const test::CliResult r =
      test::shell("ulimit -s 8192; ulimit -v 1000000; \"$POLYKV\" run -m " + embedded_model() + " -p x -n 8 -t 200");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot start thread"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("terminate called"), std::string::npos) << r.out;
}

TEST(ThreadFlags, OutOfRangeIsAUsageErrorForEveryCommand) {
  const std::string m = embedded_model();
  const std::string commands[] = {
      "run -m " + m + " -p x -n 1",
      "logits -m " + m + " --ids 1 -o /dev/null",
      "bench -m " + m + " -p 8 -n 1",
      "quantize " + m + " /dev/null q8_0",
      "eval ppl -m " + m + " --ids /dev/null",
      "eval kld -m " + m + " --ids /dev/null -ctk f16 -ctv f16",
      "eval needle -m " + m + " --cases /dev/null",
  };
  for (const std::string& cmd : commands)
    for (const char* t : {"0", "-7", "1025", "x"}) {
      const test::CliResult r = test::polykv(cmd + " -t " + t);
      EXPECT_EQ(r.code, 2) << cmd << " -t " << t << ": " << r.out;
      EXPECT_NE(r.out.find("--threads"), std::string::npos) << r.out;
    }
  for (const char* t : {"0", "-1", "2000"}) {
    const test::CliResult r = test::polykv(std::string("synth --shape tiny --type q8_0 -o /dev/null --threads ") + t);
    EXPECT_EQ(r.code, 2) << t << ": " << r.out;
  }
}

TEST(ThreadFlags, MoreThanTheHardwareThreadsWarnsAndRuns) {
  const unsigned hw = std::thread::hardware_concurrency();
  ASSERT_GT(hw, 0u);
  ASSERT_LT(hw, 1024u) << "no -t value above this machine's threads is allowed";
  const std::string t = std::to_string(hw + 1);
  const test::CliResult r = test::polykv("logits -m " + embedded_model() + " --ids 1,2 -o /dev/null -t " + t);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("-t " + t + " exceeds the " + std::to_string(hw) + " hardware threads; this will be slow"),
            std::string::npos)
      << r.out;
  const test::CliResult ok = test::polykv("logits -m " + embedded_model() + " --ids 1,2 -o /dev/null -t 1");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(ok.out.find("exceeds"), std::string::npos) << ok.out;
}

}  // namespace
}  // namespace polykv
