// nvcc translation unit for kernels/rerotate.cuh (the kernels live in the header so the CPU emulator can include them).
#include "backend/cuda/kernels/rerotate.cuh"
