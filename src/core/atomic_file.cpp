#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace polykv {
namespace {

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The permissions a plain fopen(path, "w") would give a new file: 0666 less the umask. umask() can
// only be read by setting it, so it is set back at once.
mode_t new_file_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::string& path) : path_(path), target_(path) {
  check(!path.empty(), "empty output file name");
  struct stat st {};
  mode_t mode = new_file_mode();
  if (::stat(path.c_str(), &st) == 0) {
    check(!S_ISDIR(st.st_mode), "cannot write '", path, "': it is a directory");
    if (!S_ISREG(st.st_mode)) {  // a device, FIFO or socket: no file to replace, write into it
      file_ = std::fopen(path.c_str(), "wb");
      check(file_ != nullptr, "cannot open '", path, "' for writing: ", std::strerror(errno));
      return;
    }
    mode = st.st_mode & 07777;  // replacing a file keeps its permissions
    struct stat lst {};
    if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      char* real = ::realpath(path.c_str(), nullptr);
      check(real != nullptr, "cannot resolve '", path, "': ", std::strerror(errno));
      target_ = real;
      std::free(real);
    }
  }
  std::vector<char> name(target_.begin(), target_.end());
  for (char c : std::string_view(".tmp.XXXXXX")) name.push_back(c);
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  check(fd >= 0, "cannot create a temporary file in '", dir_of(target_), "' for '", path, "': ",
        std::strerror(errno));
  temp_ = name.data();
  ::fchmod(fd, mode);  // mkstemp makes 0600; failing to widen it is not worth failing the command
  file_ = ::fdopen(fd, "wb");
  if (file_ == nullptr) {
    const int err = errno;
    ::close(fd);
    ::unlink(temp_.c_str());
    fail("cannot open '", temp_, "': ", std::strerror(err));
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_) std::fclose(file_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t n) {
  check(file_ != nullptr && !committed_, "write to '", path_, "' after commit");
  check(n == 0 || std::fwrite(data, 1, n, file_) == n, "write to '", path_, "' failed: ", std::strerror(errno));
}

void AtomicFileWriter::commit() {
  check(file_ != nullptr && !committed_, "'", path_, "' committed twice");
  check(std::fflush(file_) == 0, "write to '", path_, "' failed: ", std::strerror(errno));
  if (temp_.empty()) {  // written in place
    const int rc = std::fclose(file_);
    file_ = nullptr;
    check(rc == 0, "write to '", path_, "' failed: ", std::strerror(errno));
    committed_ = true;
    return;
  }
  check(::fsync(::fileno(file_)) == 0, "cannot sync '", temp_, "': ", std::strerror(errno));
  const int rc = std::fclose(file_);
  file_ = nullptr;
  check(rc == 0, "write to '", path_, "' failed: ", std::strerror(errno));
  check(::rename(temp_.c_str(), target_.c_str()) == 0, "cannot rename '", temp_, "' to '", target_, "': ",
        std::strerror(errno));
  committed_ = true;
  // Make the rename itself durable; a folder that cannot be synced leaves the file complete anyway.
  const int dir = ::open(dir_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void check_not_input(const std::string& out_path, const std::string& in_path) {
  check(!same_file(out_path, in_path), "output '", out_path, "' is the input file '", in_path,
        "' (the same file, or a link to it); choose another output path");
}

}  // namespace polykv
