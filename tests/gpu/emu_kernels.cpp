// The CUDA backend's kernels compiled for the CPU emulator (backend/cuda/emu/cuda_emu.hpp): the same sources nvcc
// compiles into libripplekv, here in namespace rkv::cuda_emu for the test_gpu_emu suite.
#include "backend/cuda/kernels/attention_stats.cuh"
#include "backend/cuda/kernels/codec.cuh"
#include "backend/cuda/kernels/decode_attention.cuh"
#include "backend/cuda/kernels/elementwise.cuh"
#include "backend/cuda/kernels/kl.cuh"
#include "backend/cuda/kernels/perturb.cuh"
#include "backend/cuda/kernels/prefill_attention.cuh"
#include "backend/cuda/kernels/rerotate.cuh"
#include "backend/cuda/kernels/rope.cuh"
#include "backend/cuda/kernels/selection.cuh"
