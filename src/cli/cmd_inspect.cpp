// `polykv inspect FILE`: metadata and tensor table of a GGUF file.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "gguf/gguf.h"

namespace polykv::cli {

int cmd_inspect(int argc, char** argv) {
  CLI::App app{"Print a GGUF file's metadata and tensors", "polykv inspect"};
  std::string path;
  int max_items = 6;
  app.add_option("file", path, "GGUF file")->required();
  app.add_option("--array-items", max_items, "array elements shown per metadata value")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  if (auto rc = parse_args(app, argc, argv)) return *rc;

  const GgufFile f = GgufFile::open(path);
  std::printf("file: %s (%zu bytes, GGUF v%u, alignment %llu)\n", path.c_str(), f.file_size(), f.version(),
              (unsigned long long)f.alignment());
  std::printf("metadata: %zu keys\n", f.metadata().size());
  for (const auto& [k, v] : f.metadata())
    std::printf("  %-48s %-7s %s\n", k.c_str(), gguf_type_name(v.type), v.to_string(size_t(max_items)).c_str());
  std::printf("tensors: %zu\n", f.tensors().size());
  uint64_t total = 0;
  for (const auto& t : f.tensors()) {
    std::string shape = "[";
    for (size_t d = 0; d < t.ne.size(); ++d) shape += (d ? ", " : "") + std::to_string(t.ne[d]);
    shape += "]";
    std::printf("  %-40s %-22s %-6s %12llu bytes\n", t.name.c_str(), shape.c_str(), dtype_name(t.type),
                (unsigned long long)t.n_bytes);
    total += t.n_bytes;
  }
  std::printf("tensor bytes: %llu\n", (unsigned long long)total);
  return 0;
}

}  // namespace polykv::cli
