# FindKhorovodNCCL: the CUDA runtime and the NCCL header that the NCCL
# backend builds on. libnccl itself is not linked: the backend loads it at
# run time (backend/nccl/nccl_library.h), so only nccl.h is looked for.
#
# Looks in, in order: KHOROVOD_CUDA_ROOT (CMake or environment variable), the
# prefix scripts/install-cuda.sh fills (~/.cache/khorovod/cuda-*-nccl-*, the
# newest first), CUDA_HOME, /usr/local/cuda, then the system paths. Only
# headers and the cudart shared library are needed: no nvcc, no driver
# (libcuda is loaded by cudart at the first CUDA call, not at link or load
# time) and no libnccl.
#
# Defines, when found:
#   KhorovodNCCL_FOUND, KhorovodNCCL_VERSION (NCCL's), KhorovodNCCL_CUDART_FOUND
#   imported targets khorovod::cudart and khorovod::nccl (nccl.h's include
#   directory and libdl: an interface, no library)
# KhorovodNCCL_CUDART_FOUND alone (CUDA without NCCL) is enough for the
# host-staging backend.
set(_kh_hints)
if(KHOROVOD_CUDA_ROOT)
  list(APPEND _kh_hints "${KHOROVOD_CUDA_ROOT}")
endif()
if(DEFINED ENV{KHOROVOD_CUDA_ROOT})
  list(APPEND _kh_hints "$ENV{KHOROVOD_CUDA_ROOT}")
endif()
file(GLOB _kh_cached LIST_DIRECTORIES true "$ENV{HOME}/.cache/khorovod/cuda-*-nccl-*")
list(SORT _kh_cached COMPARE NATURAL ORDER DESCENDING)
foreach(_d IN LISTS _kh_cached)
  if(EXISTS "${_d}/.complete")
    list(APPEND _kh_hints "${_d}")
  endif()
endforeach()
if(DEFINED ENV{CUDA_HOME})
  list(APPEND _kh_hints "$ENV{CUDA_HOME}")
endif()
list(APPEND _kh_hints /usr/local/cuda)

# What an earlier configure found is cached. Forget it when a prefix named
# now does not hold it, or when its nccl.h is older than the backend loads
# (a build directory configured before install-cuda.sh moved to NCCL 2.32).
function(_kh_nccl_header_version dir out)
  set(${out} "0" PARENT_SCOPE)
  if(EXISTS "${dir}/nccl.h")
    file(STRINGS "${dir}/nccl.h" _v REGEX "^#define NCCL_VERSION_CODE +[0-9]+")
    string(REGEX REPLACE ".*NCCL_VERSION_CODE +([0-9]+).*" "\\1" _v "${_v}")
    if(_v MATCHES "^[0-9]+$")
      set(${out} "${_v}" PARENT_SCOPE)
    endif()
  endif()
endfunction()
if(KhorovodNCCL_INCLUDE_DIR)
  _kh_nccl_header_version("${KhorovodNCCL_INCLUDE_DIR}" _kh_cached_code)
  set(_kh_stale FALSE)
  if(_kh_cached_code LESS 22700)
    set(_kh_stale TRUE)
  endif()
  if(KHOROVOD_CUDA_ROOT)
    string(FIND "${KhorovodNCCL_INCLUDE_DIR}" "${KHOROVOD_CUDA_ROOT}" _kh_pos)
    if(NOT _kh_pos EQUAL 0)
      set(_kh_stale TRUE)
    endif()
  endif()
  if(_kh_stale)
    unset(KhorovodNCCL_INCLUDE_DIR CACHE)
    unset(KhorovodNCCL_CUDART_INCLUDE_DIR CACHE)
    unset(KhorovodNCCL_CUDART_LIBRARY CACHE)
  endif()
endif()

find_path(KhorovodNCCL_CUDART_INCLUDE_DIR cuda_runtime_api.h HINTS ${_kh_hints} PATH_SUFFIXES include)
find_library(KhorovodNCCL_CUDART_LIBRARY NAMES cudart libcudart.so.12 HINTS ${_kh_hints}
             PATH_SUFFIXES lib lib64 targets/x86_64-linux/lib)
find_path(KhorovodNCCL_INCLUDE_DIR nccl.h HINTS ${_kh_hints} PATH_SUFFIXES include)

if(KhorovodNCCL_INCLUDE_DIR AND EXISTS "${KhorovodNCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${KhorovodNCCL_INCLUDE_DIR}/nccl.h" _kh_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*" "\\1" _kh_major "${_kh_ver}")
  string(REGEX REPLACE ".*NCCL_MINOR +([0-9]+).*" "\\1" _kh_minor "${_kh_ver}")
  string(REGEX REPLACE ".*NCCL_PATCH +([0-9]+).*" "\\1" _kh_patch "${_kh_ver}")
  set(KhorovodNCCL_VERSION "${_kh_major}.${_kh_minor}.${_kh_patch}")
endif()

if(KhorovodNCCL_CUDART_INCLUDE_DIR AND KhorovodNCCL_CUDART_LIBRARY)
  set(KhorovodNCCL_CUDART_FOUND TRUE)
  if(NOT TARGET khorovod::cudart)
    add_library(khorovod::cudart SHARED IMPORTED)
    set_target_properties(khorovod::cudart PROPERTIES
      IMPORTED_LOCATION "${KhorovodNCCL_CUDART_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${KhorovodNCCL_CUDART_INCLUDE_DIR}"
      # The headers are third-party; keep their warnings out of -Werror builds.
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${KhorovodNCCL_CUDART_INCLUDE_DIR}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
# The version asked for (2.27 in KhorovodGpu.cmake) is the oldest NCCL the
# backend loads at run time (the first with ncclCommShrink).
find_package_handle_standard_args(KhorovodNCCL
  REQUIRED_VARS KhorovodNCCL_INCLUDE_DIR KhorovodNCCL_CUDART_LIBRARY
                KhorovodNCCL_CUDART_INCLUDE_DIR
  VERSION_VAR KhorovodNCCL_VERSION)

if(KhorovodNCCL_FOUND AND NOT TARGET khorovod::nccl)
  add_library(khorovod::nccl INTERFACE IMPORTED)
  set_target_properties(khorovod::nccl PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${KhorovodNCCL_INCLUDE_DIR}"
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${KhorovodNCCL_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "khorovod::cudart;${CMAKE_DL_LIBS}")
endif()
mark_as_advanced(KhorovodNCCL_CUDART_INCLUDE_DIR KhorovodNCCL_CUDART_LIBRARY KhorovodNCCL_INCLUDE_DIR)
