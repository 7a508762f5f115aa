#include "launcher/scoped_temp_dir.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace khorovod::launcher {

ScopedTempDir::ScopedTempDir(const std::string& prefix) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string base = (tmpdir != nullptr && *tmpdir != '\0') ? tmpdir : "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string pattern = base + "/" + prefix + "XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    throw std::runtime_error("cannot create temporary directory '" + pattern +
                             "': " + std::strerror(errno));
  }
  path_ = buf.data();
}

ScopedTempDir::~ScopedTempDir() {
  // remove_all does not follow symlinks, so a worker cannot trick the
  // launcher into deleting anything outside the directory. Errors are
  // ignored: a destructor has no one to report to, and leaving a stray
  // directory in $TMPDIR is the worst outcome.
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace khorovod::launcher
