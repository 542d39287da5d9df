/* Test fixtures in plain C (tests/plugins/raw_*.c): the machinery of a one-allocator library, included after the
 * file defines its `static const rkv_plugin_descriptor desc`. The allocator splits B equally over the layers
 * (b_l = B / |A|); count(), at(), create() serve `desc`. Each file still defines its own rkv_plugin_library. */
#ifndef RKV_TEST_RAW_ALLOCATOR_H
#define RKV_TEST_RAW_ALLOCATOR_H
#include <ripplekv/plugin.h>

#include <stddef.h>
#include <stdlib.h>

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
#endif
