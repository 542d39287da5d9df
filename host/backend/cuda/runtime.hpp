// The CUDA runtime and cuBLAS APIs the backend uses: the real headers, or the CPU emulator in tests (ns.hpp).
#pragma once
#include "backend/cuda/ns.hpp"

#if RKV_CUDA_EMU
#include "backend/cuda/emu/cublas.hpp"  // with runtime_api.hpp and cuda_emu.hpp
#else
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif
