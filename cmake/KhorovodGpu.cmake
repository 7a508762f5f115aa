# Decides which GPU backends are built, from KHOROVOD_WITH_NCCL:
#   AUTO (default)  build them when the CUDA runtime (and NCCL) are found
#   ON              the same, but fail configuration if they are missing
#   OFF             build none; device tensors are then rejected
# Sets KHOROVOD_HAVE_CUDART (the host-staging backend) and KHOROVOD_HAVE_NCCL
# (the NCCL backend). scripts/install-cuda.sh provides both without a GPU.
set(KHOROVOD_WITH_NCCL AUTO CACHE STRING "Build the GPU backends: AUTO, ON or OFF")
set_property(CACHE KHOROVOD_WITH_NCCL PROPERTY STRINGS AUTO ON OFF)
set(KHOROVOD_CUDA_ROOT "" CACHE PATH "Prefix holding include/ and lib/ of the CUDA runtime and NCCL")

set(KHOROVOD_HAVE_CUDART OFF)
set(KHOROVOD_HAVE_NCCL OFF)
if(KHOROVOD_WITH_NCCL STREQUAL "ON")
  find_package(KhorovodNCCL 2.27 REQUIRED)
elseif(KHOROVOD_WITH_NCCL STREQUAL "AUTO")
  find_package(KhorovodNCCL 2.27 QUIET)
elseif(NOT KHOROVOD_WITH_NCCL STREQUAL "OFF")
  message(FATAL_ERROR "KHOROVOD_WITH_NCCL must be AUTO, ON or OFF (got '${KHOROVOD_WITH_NCCL}')")
endif()
if(NOT KHOROVOD_WITH_NCCL STREQUAL "OFF")
  set(KHOROVOD_HAVE_CUDART ${KhorovodNCCL_CUDART_FOUND})
  set(KHOROVOD_HAVE_NCCL ${KhorovodNCCL_FOUND})
endif()
if(KHOROVOD_HAVE_NCCL)
  message(STATUS "khorovod: NCCL backend ON (nccl.h ${KhorovodNCCL_VERSION}, ${KhorovodNCCL_INCLUDE_DIR}; libnccl >= 2.27 loaded at run time)")
elseif(KHOROVOD_HAVE_CUDART)
  message(STATUS "khorovod: NCCL not found; host-staging backend only (${KhorovodNCCL_CUDART_LIBRARY})")
else()
  message(STATUS "khorovod: GPU backends OFF (KHOROVOD_WITH_NCCL=${KHOROVOD_WITH_NCCL})")
endif()
