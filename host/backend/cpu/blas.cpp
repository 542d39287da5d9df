#include "backend/cpu/blas.hpp"

#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace rkv::cpu {

namespace {

bool g_core_corrected = false;

/// See blas.hpp. Runs once from a static initializer, before any BLAS call of this library.
bool correct_openblas_core() {
  if (std::getenv("OPENBLAS_CORETYPE")) return false;  // the user's choice
  const char* core = openblas_get_corename();
  if (!core) return false;
  static const char* const legacy[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge"};
  bool is_legacy = false;
  for (const char* l : legacy) is_legacy |= std::strcmp(core, l) == 0;
  if (!is_legacy) return false;
  const char* want = nullptr;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    want = "SkylakeX";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    want = "Haswell";
  }
#endif
  if (!want || std::strcmp(core, want) == 0) return false;
  // Present only in DYNAMIC_ARCH builds of OpenBLAS (Debian's); looked up at run time so other builds still link.
  auto quit = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  auto init = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (!quit || !init) return false;
  setenv("OPENBLAS_CORETYPE", want, 0);
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE");
  return std::strcmp(openblas_get_corename(), want) == 0;
}

const bool g_core_checked = (g_core_corrected = correct_openblas_core(), true);

}  // namespace

std::string blas_core_name() {
  (void)g_core_checked;
  const char* core = openblas_get_corename();
  return std::string(core ? core : "unknown") + (g_core_corrected ? " (selected by ripplekv)" : "");
}

void gemm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
             float beta, float* C, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, A, static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

void gemm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
             float beta, float* C, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, A, static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

void linear(const float* x, int64_t rows, int64_t in, const float* W, int64_t out, float* y, float beta) {
  if (rows == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(out), static_cast<blasint>(in), 1.0f, W,
                static_cast<blasint>(in), x, 1, beta, y, 1);
  } else {
    gemm_nt(rows, out, in, 1.0f, x, in, W, in, beta, y, out);
  }
}

}  // namespace rkv::cpu
