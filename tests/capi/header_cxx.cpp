// abi/ripplekv/ripplekv.h compiles as C++ (built by the test_capi_cxx_header object library).
#include <ripplekv/ripplekv.h>

static_assert(sizeof(rkv_run_options) > sizeof(size_t), "rkv_run_options begins with struct_size");
