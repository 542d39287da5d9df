/* Test fixture: an entry point that returns NULL (a failing library). */
#include <ripplekv/plugin.h>

RKV_PLUGIN_EXPORT const rkv_plugin_library* rkv_plugin_library_get(uint32_t major, uint32_t minor) {
  (void)major; (void)minor;
  return NULL;
}
