// nvcc translation unit for kernels/kl.cuh (the kernels live in the header so the CPU emulator can include them).
#include "backend/cuda/kernels/kl.cuh"
