// Stand-in for a header Debian's libgloo-dev (0.0~git20220518) includes from
// <gloo/transport/tcp/pair.h> but does not ship.
//
// Only bootstrap/gloo_mesh.cc sees it, and only where the system Gloo lacks
// the real one. That file calls one exported, out-of-line member of
// gloo::transport::tcp::Pair and never creates, copies or reads an object of
// these types, so their layout here does not have to match the library's.
#pragma once

namespace gloo {

template <typename T>
class NonOwningPtr {
 public:
  NonOwningPtr() = default;
};

template <typename T>
class WeakNonOwningPtr {
 public:
  WeakNonOwningPtr() = default;
};

}  // namespace gloo
