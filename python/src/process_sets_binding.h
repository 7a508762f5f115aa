// Python bindings of the runtime's process sets (khorovod/process_set.h):
// registration, queries, and the collectives with a process set, kept
// apart from the global-set methods of khorovod_ext.cc so that their hot
// path is untouched. Same conventions: failures come back as
// (code, message), blocking calls release the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include "khorovod/runtime.h"

namespace khorovod::python {

void BindProcessSets(pybind11::class_<Runtime>& runtime);

}  // namespace khorovod::python
