// The one place that includes <nccl.h>: its types, constants and the
// declarations whose types NcclLibrary's function pointers take (libnccl
// itself is never linked; see nccl_library.h).
//
// nccl.h includes cuda_fp16.h, cuda_bf16.h and (2.2x+) cuda_fp8.h, which
// need CCCL's <nv/target>; the CUDA wheels CI installs
// (scripts/install-cuda.sh) do not ship it, and khorovod never uses the
// __half/__nv_bfloat16/fp8 types on the host (it passes the NCCL enums and
// raw pointers). So their include guards are defined first, which skips them
// (and the bf16 marker nccl.h checks is set just for its enum). A translation
// unit that needs those types must include them before this header.
#pragma once

#ifndef __CUDA_FP16_H__
#define __CUDA_FP16_H__
#define KHOROVOD_SKIPPED_CUDA_FP16
#endif
#ifndef __CUDA_BF16_H__
#define __CUDA_BF16_H__
#define KHOROVOD_SKIPPED_CUDA_BF16
// nccl.h declares ncclBfloat16 only when cuda_bf16.h says the type exists.
#define __CUDA_BF16_TYPES_EXIST__
#endif
#ifndef __CUDA_FP8_H__
#define __CUDA_FP8_H__
#endif

#include <nccl.h>  // IWYU pragma: export

#ifdef KHOROVOD_SKIPPED_CUDA_BF16
#undef __CUDA_BF16_TYPES_EXIST__
#endif
