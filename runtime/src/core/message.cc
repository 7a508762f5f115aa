#include "core/message.h"

#include <cstring>
#include <type_traits>

namespace khorovod {
namespace {

// Upper bounds that keep a corrupt length from causing a huge allocation.
constexpr uint64_t kMaxItems = 1u << 24;
constexpr uint64_t kMaxStringBytes = 1u << 20;

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    out_.append(s);
  }
  void PutInts(const std::vector<int64_t>& v) {
    Put<uint64_t>(v.size());
    for (int64_t x : v) Put<int64_t>(x);
  }
  void PutDevice(const Device& d) {
    Put<uint8_t>(static_cast<uint8_t>(d.kind));
    Put<int32_t>(d.index);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}

  template <typename T>
  bool Get(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetString(std::string* s) {
    uint64_t n;
    if (!Get(&n) || n > kMaxStringBytes || in_.size() - pos_ < n) return false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool GetInts(std::vector<int64_t>* v) {
    uint64_t n;
    if (!Get(&n) || n > kMaxItems || (in_.size() - pos_) / sizeof(int64_t) < n) return false;
    v->resize(n);
    for (auto& x : *v) Get(&x);
    return true;
  }
  bool GetDevice(Device* d) {
    uint8_t kind;
    if (!Get(&kind) || kind > static_cast<uint8_t>(DeviceKind::kCUDA) || !Get(&d->index))
      return false;
    d->kind = static_cast<DeviceKind>(kind);
    return true;
  }
  bool GetDtype(DataType* d) {
    uint8_t raw;
    if (!Get(&raw) || !IsValidDataType(raw)) return false;
    *d = static_cast<DataType>(raw);
    return true;
  }
  bool GetReduceOp(ReduceOp* op) {
    uint8_t raw;
    if (!Get(&raw) || raw > static_cast<uint8_t>(ReduceOp::kAdasum)) return false;
    *op = static_cast<ReduceOp>(raw);
    return true;
  }
  bool GetOpType(OpType* op) {
    uint8_t raw;
    if (!Get(&raw) || raw > static_cast<uint8_t>(OpType::kProcessSet)) return false;
    *op = static_cast<OpType>(raw);
    return true;
  }
  bool AtEnd() const { return pos_ == in_.size(); }
  size_t Remaining() const { return in_.size() - pos_; }

 private:
  const std::string& in_;
  size_t pos_ = 0;
};

Status Malformed(const char* what) {
  return Status::Internal(std::string("malformed negotiation message: ") + what);
}

bool CheckHeader(Reader& r, uint64_t* count) {
  uint32_t version;
  return r.Get(&version) && version == kProtocolVersion && r.Get(count) && *count <= kMaxItems;
}

}  // namespace

bool Request::SameParameters(const Request& o) const {
  return op == o.op && name == o.name && dtype == o.dtype && reduce_op == o.reduce_op &&
         root == o.root && device == o.device && shape == o.shape && prescale == o.prescale &&
         postscale == o.postscale && splits == o.splits && group == o.group &&
         group_size == o.group_size && process_set == o.process_set;
}

int64_t Response::total_elements() const {
  int64_t n = 0;
  for (int64_t s : sizes) n += s;
  return n;
}

std::string EncodeRequests(const std::vector<Request>& requests) {
  Writer w;
  w.Put<uint32_t>(kProtocolVersion);
  w.Put<uint64_t>(requests.size());
  for (const Request& q : requests) {
    w.Put<int32_t>(q.rank);
    w.Put<uint8_t>(static_cast<uint8_t>(q.op));
    w.PutString(q.name);
    w.Put<uint8_t>(static_cast<uint8_t>(q.dtype));
    w.Put<uint8_t>(static_cast<uint8_t>(q.reduce_op));
    w.Put<int32_t>(q.root);
    w.PutDevice(q.device);
    w.PutInts(q.shape);
    w.Put<double>(q.prescale);
    w.Put<double>(q.postscale);
    w.PutInts(q.splits);
    w.PutString(q.group);
    w.Put<int32_t>(q.group_size);
    w.Put<int32_t>(q.process_set);
  }
  return w.Take();
}

Status DecodeRequests(const std::string& bytes, std::vector<Request>* out) {
  Reader r(bytes);
  uint64_t n;
  if (!CheckHeader(r, &n)) return Malformed("request header");
  out->clear();
  // No reserve(n): n is untrusted; a short message runs out of bytes first.
  for (uint64_t i = 0; i < n; ++i) {
    Request q;
    bool ok = r.Get(&q.rank) && r.GetOpType(&q.op) && r.GetString(&q.name) &&
              r.GetDtype(&q.dtype) && r.GetReduceOp(&q.reduce_op) && r.Get(&q.root) &&
              r.GetDevice(&q.device) && r.GetInts(&q.shape) && r.Get(&q.prescale) &&
              r.Get(&q.postscale) && r.GetInts(&q.splits) && r.GetString(&q.group) &&
              r.Get(&q.group_size) && r.Get(&q.process_set);
    if (!ok) return Malformed("request body");
    out->push_back(std::move(q));
  }
  if (!r.AtEnd()) return Malformed("trailing bytes after requests");
  return Status::Ok();
}

std::string EncodeResponses(const std::vector<Response>& responses) {
  Writer w;
  w.Put<uint32_t>(kProtocolVersion);
  w.Put<uint64_t>(responses.size());
  for (const Response& p : responses) {
    w.Put<uint8_t>(static_cast<uint8_t>(p.kind));
    w.Put<uint8_t>(static_cast<uint8_t>(p.op));
    w.Put<uint64_t>(p.names.size());
    for (const auto& name : p.names) w.PutString(name);
    w.Put<uint8_t>(static_cast<uint8_t>(p.dtype));
    w.Put<uint8_t>(static_cast<uint8_t>(p.reduce_op));
    w.Put<int32_t>(p.root);
    w.PutDevice(p.device);
    w.Put<double>(p.prescale);
    w.Put<double>(p.postscale);
    w.PutInts(p.sizes);
    w.Put<int64_t>(p.row_elements);
    w.PutString(p.group);
    w.Put<int32_t>(p.group_size);
    w.Put<int32_t>(p.join_last_rank);
    w.Put<uint8_t>(static_cast<uint8_t>(p.error_code));
    w.PutString(p.error_message);
    w.Put<int32_t>(p.process_set);
    w.PutInts(p.members);
  }
  return w.Take();
}

Status DecodeResponses(const std::string& bytes, std::vector<Response>* out) {
  Reader r(bytes);
  uint64_t n;
  if (!CheckHeader(r, &n)) return Malformed("response header");
  out->clear();
  for (uint64_t i = 0; i < n; ++i) {
    Response p;
    uint8_t kind, code;
    uint64_t names;
    if (!r.Get(&kind) || kind > 1 || !r.GetOpType(&p.op) || !r.Get(&names) ||
        names > r.Remaining() / sizeof(uint64_t)) {
      return Malformed("response kind");
    }
    p.kind = static_cast<Response::Kind>(kind);
    for (uint64_t k = 0; k < names; ++k) {
      std::string name;
      if (!r.GetString(&name)) return Malformed("response name");
      p.names.push_back(std::move(name));
    }
    bool ok = r.GetDtype(&p.dtype) && r.GetReduceOp(&p.reduce_op) && r.Get(&p.root) &&
              r.GetDevice(&p.device) && r.Get(&p.prescale) && r.Get(&p.postscale) &&
              r.GetInts(&p.sizes) && r.Get(&p.row_elements) && r.GetString(&p.group) &&
              r.Get(&p.group_size) && r.Get(&p.join_last_rank) && r.Get(&code) &&
              code <= static_cast<uint8_t>(StatusCode::kJobFinished) &&
              r.GetString(&p.error_message) && r.Get(&p.process_set) && r.GetInts(&p.members);
    if (!ok) return Malformed("response body");
    p.error_code = static_cast<StatusCode>(code);
    out->push_back(std::move(p));
  }
  if (!r.AtEnd()) return Malformed("trailing bytes after responses");
  return Status::Ok();
}

}  // namespace khorovod
