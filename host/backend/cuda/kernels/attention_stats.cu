// nvcc translation unit for kernels/attention_stats.cuh (the kernels live in the header so the CPU emulator can include them).
#include "backend/cuda/kernels/attention_stats.cuh"
