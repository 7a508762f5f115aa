#include "launcher/rank_output_files.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace khorovod::launcher {
namespace {

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::Ok();
  return Status::InvalidArgument("--output-filename: cannot create " + path + ": " +
                                 std::strerror(errno));
}

StatusOr<UniqueFd> OpenForWriting(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd)
    return Status::InvalidArgument("--output-filename: cannot open " + path + ": " +
                                   std::strerror(errno));
  return fd;
}

}  // namespace

std::string RankDirName(int rank, int size) {
  const std::size_t width = std::to_string(size > 1 ? size - 1 : 0).size();
  std::string digits = std::to_string(rank);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return "rank." + digits;
}

StatusOr<RankOutputFiles> OpenRankOutputFiles(const std::string& dir, int rank, int size) {
  // Parents first, as Horovod's _mkdir_p.
  for (std::size_t slash = dir.find('/', 1); slash != std::string::npos;
       slash = dir.find('/', slash + 1)) {
    KH_RETURN_IF_ERROR(MakeDir(dir.substr(0, slash)));
  }
  KH_RETURN_IF_ERROR(MakeDir(dir));
  const std::string rank_dir = dir + "/" + RankDirName(rank, size);
  KH_RETURN_IF_ERROR(MakeDir(rank_dir));
  StatusOr<UniqueFd> out = OpenForWriting(rank_dir + "/stdout");
  if (!out.ok()) return out.status();
  StatusOr<UniqueFd> err = OpenForWriting(rank_dir + "/stderr");
  if (!err.ok()) return err.status();
  return RankOutputFiles{std::move(*out), std::move(*err)};
}

}  // namespace khorovod::launcher
