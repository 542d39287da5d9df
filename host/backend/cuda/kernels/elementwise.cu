// nvcc translation unit for kernels/elementwise.cuh (the kernels live in the header so the CPU emulator can include them).
#include "backend/cuda/kernels/elementwise.cuh"
