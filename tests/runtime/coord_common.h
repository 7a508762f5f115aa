// Request builders shared by the coordinator tests.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/coordinator.h"

namespace khorovod::testing {

using Clock = Coordinator::Clock;
// An arbitrary fixed instant: the tests pass explicit clock readings.
inline const Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1);

inline Request MakeRequest(int rank, OpType op, const std::string& name, Shape shape = {4},
                           DataType dtype = DataType::kFloat32) {
  Request q;
  q.rank = rank;
  q.op = op;
  q.name = name;
  q.shape = std::move(shape);
  q.dtype = dtype;
  return q;
}

inline Request Allreduce(int rank, const std::string& name, Shape shape = {4}) {
  return MakeRequest(rank, OpType::kAllreduce, name, std::move(shape));
}

inline std::vector<std::string> Names(const std::vector<Response>& responses) {
  std::vector<std::string> out;
  for (const Response& r : responses) {
    for (const std::string& n : r.names) out.push_back(n);
  }
  return out;
}

}  // namespace khorovod::testing
