/* Test fixture: an "older" plugin whose descriptor and param spec declare a struct_size smaller than this host's
 * (the descriptor ends before `flags`, the param spec before `choices`). The host must read only what lies inside
 * struct_size: the plugin loads, lists, and its one int parameter validates. Written in plain C against the ABI. */
#include <ripplekv/plugin.h>

#include <stddef.h>
#include <stdlib.h>

static const rkv_param_spec count_spec = {
    offsetof(rkv_param_spec, choices), "count", RKV_PARAM_INT, "an int >= 1", 0, 5, 0.0, NULL, 1, 0, 1.0, 0.0, NULL};
static const rkv_param_spec* const params[] = {&count_spec, NULL};
static const rkv_plugin_descriptor desc = {offsetof(rkv_plugin_descriptor, flags), "org.test.old_struct",
                                           RKV_KIND_ALLOCATOR, "0.0.1", "test fixture: short structs", params, 0};

#include "raw_allocator.h"

static const rkv_plugin_library lib = {sizeof(rkv_plugin_library), RKV_ABI_VERSION_MAJOR, 0, "old struct", count, at,
                                       create};

RKV_PLUGIN_EXPORT const rkv_plugin_library* rkv_plugin_library_get(uint32_t major, uint32_t minor) {
  (void)major; (void)minor;
  return &lib;
}
