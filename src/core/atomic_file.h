// Output files that are never seen half-written and never clobber an input.
//
// AtomicFileWriter writes to a temporary file `PATH.tmp.XXXXXX` (mkstemp) in PATH's folder, and
// commit() flushes it, fsyncs it and renames it onto PATH: readers see the old PATH or the complete
// new one. Until commit(), PATH is untouched; a writer destroyed without commit() (an error, an
// exception) removes its temporary file. Exceptions, where the rename cannot apply:
//   - PATH is an existing symlink: the file it points to is replaced (the link stays a link);
//   - PATH exists and is not a regular file (/dev/null, a FIFO, /dev/stdout): written in place.
// Commands that read inputs refuse an output that is one of them first: same_file().
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>

namespace polykv {

class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);  // throws Error if the file cannot be created
  ~AtomicFileWriter();                                 // without commit(): removes the temporary file
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t n);  // throws Error on I/O failure
  void commit();                           // throws Error on I/O failure (PATH is then untouched)

 private:
  std::string path_;       // as given, for messages
  std::string target_;     // the file to replace (path_, or where its symlink points)
  std::string temp_;       // the temporary file; empty when writing in place
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

// True if both paths name one existing file (same device and inode, after following symlinks): a
// hard link or symlink to a file counts as that file.
bool same_file(const std::string& a, const std::string& b);

// Throws Error (exit 1 in the CLI) if the output path names the same file as the input path.
void check_not_input(const std::string& out_path, const std::string& in_path);

}  // namespace polykv
