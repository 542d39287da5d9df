// nvcc translation unit for kernels/decode_attention.cuh (the kernels live in the header so the CPU emulator can include them).
#include "backend/cuda/kernels/decode_attention.cuh"
