/* Test fixture: a library built for plugin ABI 99.3; the host must refuse it and name both versions. */
#include <ripplekv/plugin.h>

static uint32_t count(void) { return 0; }
static const rkv_plugin_descriptor* at(uint32_t i) { (void)i; return NULL; }
static rkv_status create(const char* id, const rkv_host* h, const rkv_params* p, const rkv_diagnostics* d,
                         rkv_plugin_instance** out) {
  (void)id; (void)h; (void)p; (void)d; (void)out;
  return RKV_ERROR_UNSUPPORTED;
}
static const rkv_plugin_library lib = {sizeof(rkv_plugin_library), 99, 3, "wrong abi", count, at, create};

RKV_PLUGIN_EXPORT const rkv_plugin_library* rkv_plugin_library_get(uint32_t major, uint32_t minor) {
  (void)major; (void)minor;
  return &lib;
}
