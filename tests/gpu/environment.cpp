// Process-wide set-up of the gpu test suites: the CPU backend's thread count for the oracle, and (emulated) the folder
// make_backend("cuda") loads its module from: tests/emu-backend, the emulated libripplekv-cuda.so (tests/gpu/CMakeLists.txt).
//
// rkv::cpu's worker pool (backend/cpu/threads.cpp) records the job generation when a worker thread starts; a worker
// that starts after the first parallel_for has already published its job misses it and the caller waits forever.
// Until that is fixed there, these suites create the pool up front and give its workers time to start before the
// first job (on a GPU machine), or run the (small) CPU oracle on one thread under the emulator.
#include <gtest/gtest.h>

#include <cstdlib>
#include <chrono>
#include <thread>

#include "backend/cpu/threads.hpp"
#include "gpu_test.hpp"

namespace {

class CpuThreads : public ::testing::Environment {
 public:
  void SetUp() override {
    if (rkv_gpu_test::kEmulated) {
#ifdef RKV_EMU_BACKEND_DIR
      ::setenv("RIPPLEKV_BACKEND_DIR", RKV_EMU_BACKEND_DIR, 1);  // before any make_backend("cuda") loads a module
#endif
      rkv::cpu::set_num_threads(1);
    } else {
      rkv::cpu::set_num_threads(rkv::cpu::available_cores());
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  }
};

[[maybe_unused]] ::testing::Environment* const kCpuThreads = ::testing::AddGlobalTestEnvironment(new CpuThreads);

}  // namespace
