// ToDLPack: hands a runtime result (khorovod::Tensor, host or device) to a
// framework without copying, as a DLPack capsule ("dltensor", the legacy
// unversioned protocol that torch.utils.dlpack.from_dlpack accepts).
//
// This is how device-resident results (allgather, alltoall, reducescatter
// of CUDA tensors) become torch tensors on the same device: the capsule's
// manager owns the Tensor, so the device memory is freed (by the deleter
// the backend attached) when torch drops the tensor. The data is complete
// when the capsule is made: the runtime finished its device work before the
// handle completed, so no stream needs to be waited on.
//
// The DLPack structs are declared here from the published ABI (DLPack 0.x:
// DLDevice, DLDataType, DLTensor, DLManagedTensor), to avoid depending on a
// framework's copy of dlpack.h.
//
// Thread-safety: call with the GIL held. The deleter touches no Python
// state, so a consumer may run it on any thread.
#pragma once

#include <pybind11/pybind11.h>

#include "khorovod/tensor.h"

namespace khorovod::python {

// A capsule over `tensor` (which it takes over). The tensor must not be
// empty (DLPack consumers differ on null data).
pybind11::capsule ToDLPack(Tensor tensor);

}  // namespace khorovod::python
