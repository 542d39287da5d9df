// The namespace switch of the CUDA backend.
//
// The backend is compiled twice: for real (nvcc + cuBLAS, namespace rkv::cuda, part of libripplekv) and, in the test
// suite only, on the CPU against the emulator in backend/cuda/emu/cuda_emu.hpp (RKV_CUDA_EMU=1, namespace
// rkv::cuda_emu) so that kernel logic and binding code run where no GPU exists. Every file of the backend opens
// `namespace rkv::RKV_CUDA_NS`; the two builds never clash in one process.
#pragma once

#ifndef RKV_CUDA_EMU
#define RKV_CUDA_EMU 0
#endif
#ifndef RKV_CUDA_NS
#define RKV_CUDA_NS cuda
#endif
