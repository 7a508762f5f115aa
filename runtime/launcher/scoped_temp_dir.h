// Scoped temp dir: a private directory that disappears with its owner.
//
// khorovodrun keeps the job's file-store rendezvous in one of these. It is
// created with mkdtemp(3) (mode 0700, unpredictable name) under $TMPDIR, or
// /tmp when TMPDIR is unset or empty, and removed recursively - including
// whatever the workers wrote into it - when the object is destroyed.
// Thread-safety: none needed; the object is immutable after construction.
#pragma once

#include <string>

namespace khorovod::launcher {

class ScopedTempDir {
 public:
  // `prefix` becomes the start of the directory name. Throws
  // std::runtime_error (with the reason) if the directory cannot be made.
  explicit ScopedTempDir(const std::string& prefix);
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  ~ScopedTempDir();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace khorovod::launcher
