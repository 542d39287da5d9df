// nvcc translation unit for kernels/prefill_attention.cuh (the kernels live in the header so the CPU emulator can include them).
#include "backend/cuda/kernels/prefill_attention.cuh"
