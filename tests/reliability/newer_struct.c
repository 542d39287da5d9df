/* Test fixture: a "newer" plugin, built against a future minor version of the ABI whose structs grew at the end.
 * Its library, descriptor, param spec, instance and allocator vtable each declare a struct_size LARGER than this
 * host's (extra trailing fields the host does not know), and it reads host structs only within their struct_size.
 * The host must copy or read only what it knows: the plugin loads, lists, validates its param and allocates.
 * Written in plain C against the ABI; the extra fields hold values a host must never mistake for its own. */
#include <ripplekv/plugin.h>

#include <stddef.h>
#include <stdlib.h>

/* Each "v1.1" struct is the v1.0 struct followed by new fields. */
typedef struct {
  rkv_param_spec base;
  const char* unit; /* new in "1.1" */
  double step;      /* new in "1.1" */
} param_spec_v1_1;
typedef struct {
  rkv_plugin_descriptor base;
  const char* homepage; /* new in "1.1" */
  uint64_t more_flags;  /* new in "1.1" */
} descriptor_v1_1;
typedef struct {
  rkv_plugin_library base;
  void* (*future_function)(void); /* new in "1.1" */
} library_v1_1;
typedef struct {
  rkv_allocator_v1 base;
  rkv_status (*allocate_per_head)(void); /* new in "1.1" */
} allocator_v1_1;
typedef struct {
  rkv_plugin_instance base;
  uint64_t generation; /* new in "1.1" */
} instance_v1_1;

/* A field of the (imagined) newer host struct rkv_host 1.1: a plugin may use it only when the host's struct_size
 * says it is there, which this host's is not. */
typedef struct {
  rkv_host base;
  int32_t (*future_service)(void* ctx);
} host_v1_1;

static const param_spec_v1_1 count_spec = {
    {sizeof(param_spec_v1_1), "count", RKV_PARAM_INT, "an int in [1, 4]", 0, 2, 0.0, NULL, 1, 1, 1.0, 4.0, NULL},
    "layers",
    1.0};
static const rkv_param_spec* const params[] = {&count_spec.base, NULL};
static const descriptor_v1_1 desc = {{sizeof(descriptor_v1_1), "org.test.newer_struct", RKV_KIND_ALLOCATOR, "0.2.0",
                                      "test fixture: long structs", params, 0},
                                     "https://example.invalid",
                                     ~(uint64_t)0};

static int host_has_future_service = -1; /* set by create(): 0 expected with this host */

static rkv_status allocate(rkv_plugin_instance* self, const rkv_allocation_request* r, DLTensor* out,
                           const rkv_diagnostics* d) {
  (void)self;
  double* b = (double*)out->data;
  /* Layer 0 gets twice the share of the others: x_0 = 2c, x_l = c with c = B / (|A| + 1). */
  const double c = (double)r->budget_total / (double)(r->n_layers + 1);
  for (int64_t l = 0; l < r->n_layers; ++l) b[l] = l == 0 ? 2.0 * c : c;
  if (host_has_future_service != 0 && RKV_HAS_FIELD(d, rkv_diagnostics, report) && d->report)
    d->report(d->ctx, RKV_DIAG_WARNING, "host claims a field it does not have");
  return RKV_OK;
}
static rkv_status allocate_per_head(void) { return RKV_ERROR_UNSUPPORTED; }
static const allocator_v1_1 vtable = {{sizeof(allocator_v1_1), allocate}, allocate_per_head};

static const void* get_interface(const rkv_plugin_instance* self, const char* id) {
  (void)self;
  return (id && id[0] == 'r' && id[4] == 'a') ? (const void*)&vtable : NULL; /* "rkv.allocator/1" */
}
static void destroy(rkv_plugin_instance* self) { free(self); }

static uint32_t count(void) { return 1; }
static const rkv_plugin_descriptor* at(uint32_t i) { return i == 0 ? &desc.base : NULL; }
static rkv_status create(const char* id, const rkv_host* h, const rkv_params* p, const rkv_diagnostics* d,
                         rkv_plugin_instance** out) {
  (void)id; (void)d;
  int64_t n = 0;
  if (!RKV_HAS_FIELD(p, rkv_params, get_int) || p->get_int(p->ctx, "count", &n) != RKV_OK || n < 1) return RKV_ERROR_INTERNAL;
  host_has_future_service =
      (h && h->struct_size >= offsetof(host_v1_1, future_service) + sizeof(((host_v1_1*)0)->future_service)) ? 1 : 0;
  instance_v1_1* inst = (instance_v1_1*)calloc(1, sizeof *inst);
  if (!inst) return RKV_ERROR_OUT_OF_MEMORY;
  inst->base.struct_size = sizeof *inst;
  inst->base.get_interface = get_interface;
  inst->base.destroy = destroy;
  inst->generation = 7;
  *out = &inst->base;
  return RKV_OK;
}
static void* future_function(void) { return NULL; }
static const library_v1_1 lib = {
    {sizeof(library_v1_1), RKV_ABI_VERSION_MAJOR, RKV_ABI_VERSION_MINOR + 1, "newer struct", count, at, create},
    future_function};

RKV_PLUGIN_EXPORT const rkv_plugin_library* rkv_plugin_library_get(uint32_t major, uint32_t minor) {
  (void)major; (void)minor;
  return &lib.base;
}
