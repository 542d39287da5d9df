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

static rkv_status allocate(rkv_plugin_instance* self, const rkv_allocation_request* r, DLTensor* out,
                           const rkv_diagnostics* d) {
  (void)self; (void)d;
  double* b = (double*)out->data;
  for (int64_t l = 0; l < r->n_layers; ++l) b[l] = (double)r->budget_total / (double)r->n_layers;
  return RKV_OK;
}
static const rkv_allocator_v1 vtable = {offsetof(rkv_allocator_v1, allocate) + sizeof(void*), allocate};

static const void* get_interface(const rkv_plugin_instance* self, const char* id) {
  (void)self;
  return (id && id[0] == 'r' && id[4] == 'a') ? (const void*)&vtable : NULL; /* "rkv.allocator/1" */
}
static void destroy(rkv_plugin_instance* self) { free(self); }

static uint32_t count(void) { return 1; }
static const rkv_plugin_descriptor* at(uint32_t i) { return i == 0 ? &desc : NULL; }
static rkv_status create(const char* id, const rkv_host* h, const rkv_params* p, const rkv_diagnostics* d,
                         rkv_plugin_instance** out) {
  (void)id; (void)h; (void)p; (void)d;
  rkv_plugin_instance* inst = (rkv_plugin_instance*)calloc(1, sizeof *inst);
  if (!inst) return RKV_ERROR_OUT_OF_MEMORY;
  inst->struct_size = sizeof *inst;
  inst->get_interface = get_interface;
  inst->destroy = destroy;
  *out = inst;
  return RKV_OK;
}
static const rkv_plugin_library lib = {sizeof(rkv_plugin_library), RKV_ABI_VERSION_MAJOR, 0, "old struct", count, at,
                                       create};

RKV_PLUGIN_EXPORT const rkv_plugin_library* rkv_plugin_library_get(uint32_t major, uint32_t minor) {
  (void)major; (void)minor;
  return &lib;
}
