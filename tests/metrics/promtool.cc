#include "promtool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace khorovod::metrics::testing {

PromtoolResult PromtoolCheckMetrics(const std::string& exposition) {
  PromtoolResult r;
  char path[] = "/tmp/khorovod-exposition-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    r.output = "mkstemp failed";
    return r;
  }
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out << exposition;
  }
  const std::string cmd =
      std::string("'") + KHOROVOD_PROMTOOL + "' check metrics < " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    r.output = "cannot run " + cmd;
  } else {
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
    int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::remove(path);
  return r;
}

}  // namespace khorovod::metrics::testing
