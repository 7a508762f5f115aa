#include "elastic/checkpoint.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace khorovod::elastic {
namespace {

constexpr char kMagic[] = "khorovod-elastic-checkpoint 1\n";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;
// Bounds that a corrupt length field cannot push an allocation past.
constexpr uint32_t kMaxNameBytes = 1 << 16;
constexpr uint32_t kMaxEntries = 1 << 20;

template <typename T>
void Put(std::ofstream& out, T value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof(value));
}

void PutName(std::ofstream& out, const std::string& name) {
  Put<uint32_t>(out, static_cast<uint32_t>(name.size()));
  out.write(name.data(), static_cast<std::streamsize>(name.size()));
}

template <typename T>
bool Get(std::ifstream& in, T* value) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(value), sizeof(T)));
}

bool GetName(std::ifstream& in, std::string* name) {
  uint32_t n = 0;
  if (!Get(in, &n) || n > kMaxNameBytes) return false;
  name->resize(n);
  return static_cast<bool>(in.read(name->data(), n));
}

bool ReadHeader(std::ifstream& in, int64_t* serial) {
  char magic[kMagicSize];
  if (!in.read(magic, kMagicSize) || std::memcmp(magic, kMagic, kMagicSize) != 0) return false;
  return Get(in, serial);
}

bool ReadBody(std::ifstream& in, CheckpointData* data) {
  uint32_t counters = 0, tensors = 0;
  if (!Get(in, &counters) || counters > kMaxEntries) return false;
  for (uint32_t i = 0; i < counters; ++i) {
    std::string name;
    int64_t value = 0;
    if (!GetName(in, &name) || !Get(in, &value)) return false;
    data->counters[name] = value;
  }
  if (!Get(in, &tensors) || tensors > kMaxEntries) return false;
  for (uint32_t i = 0; i < tensors; ++i) {
    CheckpointTensor t;
    uint64_t bytes = 0;
    if (!GetName(in, &t.name) || !Get(in, &bytes)) return false;
    // Bound the allocation by what the file can still hold.
    const auto here = in.tellg();
    in.seekg(0, std::ios::end);
    const auto end = in.tellg();
    in.seekg(here);
    if (here < 0 || end < here || bytes > static_cast<uint64_t>(end - here)) return false;
    t.bytes.resize(bytes);
    if (!in.read(reinterpret_cast<char*>(t.bytes.data()), static_cast<std::streamsize>(bytes)))
      return false;
    data->tensors.push_back(std::move(t));
  }
  return true;
}

}  // namespace

Status WriteCheckpoint(const std::string& path, const CheckpointData& data) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return Status::Unavailable("checkpoint: cannot write " + tmp + ": " + std::strerror(errno));
    out.write(kMagic, kMagicSize);
    Put<int64_t>(out, data.serial);
    Put<uint32_t>(out, static_cast<uint32_t>(data.counters.size()));
    for (const auto& [name, value] : data.counters) {
      PutName(out, name);
      Put<int64_t>(out, value);
    }
    Put<uint32_t>(out, static_cast<uint32_t>(data.tensors.size()));
    for (const CheckpointTensor& t : data.tensors) {
      PutName(out, t.name);
      Put<uint64_t>(out, t.bytes.size());
      out.write(reinterpret_cast<const char*>(t.bytes.data()),
                static_cast<std::streamsize>(t.bytes.size()));
    }
    if (!out.flush()) {
      std::remove(tmp.c_str());
      return Status::Unavailable("checkpoint: writing " + tmp + " failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::Unavailable("checkpoint: cannot rename " + tmp + " to " + path + ": " + why);
  }
  return Status::Ok();
}

StatusOr<CheckpointData> ReadCheckpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::InvalidArgument("checkpoint: cannot read " + path + ": " + std::strerror(errno));
  CheckpointData data;
  if (!ReadHeader(in, &data.serial))
    return Status::InvalidArgument("checkpoint: " + path + " is not a checkpoint");
  if (!ReadBody(in, &data))
    return Status::InvalidArgument("checkpoint: " + path + " is truncated or corrupt");
  return data;
}

int64_t PeekCheckpointSerial(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  int64_t serial = 0;
  if (!in || !ReadHeader(in, &serial)) return 0;
  return serial;
}

}  // namespace khorovod::elastic
