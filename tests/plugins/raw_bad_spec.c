/* Test fixture: an allocator whose one parameter spec is broken in the way RKV_BAD_SPEC names (built once per fault,
 * into build/tests/plugins/bad_spec_<fault>/): the host must refuse the library at load, naming the plugin id, the
 * parameter and the field. Written in plain C against the ABI (the SDK would not let these through). Faults:
 *   1 nan_default      float parameter "ratio" with default NaN
 *   2 min_above_max    float parameter "ratio" with min 2 > max 1
 *   3 default_outside  int parameter "count" with default 9 outside [1, 4]
 *   4 bad_name         parameter named "2 bad-name" (not an identifier)
 *   5 choice_default   choice parameter "mode" whose default "c" is not among its choices a, b
 *   6 duplicate_name   two parameters named "ratio"
 *   7 nan_min          float parameter "ratio" with min NaN
 *   8 empty_id         a valid parameter, but the descriptor's id is "" */
#include <ripplekv/plugin.h>

#include <math.h>

static const char* const choices[] = {"a", "b", NULL};
/* One spec: name, type, default_int, default_float, default_string, has_min, has_max, min, max, choices. */
#define SPEC(name, type, di, df, ds, has_min, has_max, min, max, choices) \
  {sizeof(rkv_param_spec), name, type, "a test parameter", 0, di, df, ds, has_min, has_max, min, max, choices}
#if RKV_BAD_SPEC == 1
static const rkv_param_spec spec = SPEC("ratio", RKV_PARAM_FLOAT, 0, NAN, NULL, 1, 1, 0.0, 1.0, NULL);
#elif RKV_BAD_SPEC == 2
static const rkv_param_spec spec = SPEC("ratio", RKV_PARAM_FLOAT, 0, 1.5, NULL, 1, 1, 2.0, 1.0, NULL);
#elif RKV_BAD_SPEC == 3
static const rkv_param_spec spec = SPEC("count", RKV_PARAM_INT, 9, 0.0, NULL, 1, 1, 1.0, 4.0, NULL);
#elif RKV_BAD_SPEC == 4
static const rkv_param_spec spec = SPEC("2 bad-name", RKV_PARAM_INT, 1, 0.0, NULL, 0, 0, 0.0, 0.0, NULL);
#elif RKV_BAD_SPEC == 5
static const rkv_param_spec spec = SPEC("mode", RKV_PARAM_CHOICE, 0, 0.0, "c", 0, 0, 0.0, 0.0, choices);
#elif RKV_BAD_SPEC == 6
static const rkv_param_spec spec = SPEC("ratio", RKV_PARAM_FLOAT, 0, 0.5, NULL, 1, 1, 0.0, 1.0, NULL);
#elif RKV_BAD_SPEC == 7
static const rkv_param_spec spec = SPEC("ratio", RKV_PARAM_FLOAT, 0, 0.5, NULL, 1, 1, NAN, 1.0, NULL);
#elif RKV_BAD_SPEC == 8
static const rkv_param_spec spec = SPEC("ratio", RKV_PARAM_FLOAT, 0, 0.5, NULL, 1, 1, 0.0, 1.0, NULL);
#else
#error "RKV_BAD_SPEC must name a fault (1..8)"
#endif
#if RKV_BAD_SPEC == 6
static const rkv_param_spec* const params[] = {&spec, &spec, NULL};
#else
static const rkv_param_spec* const params[] = {&spec, NULL};
#endif
#if RKV_BAD_SPEC == 8
#define RKV_BAD_SPEC_ID ""
#else
#define RKV_BAD_SPEC_ID "org.test.bad_spec"
#endif
static const rkv_plugin_descriptor desc = {sizeof(rkv_plugin_descriptor), RKV_BAD_SPEC_ID, RKV_KIND_ALLOCATOR,
                                           "0.0.1", "test fixture: a broken param spec", params, 0};

#include "raw_allocator.h"

static const rkv_plugin_library lib = {sizeof(rkv_plugin_library), RKV_ABI_VERSION_MAJOR, RKV_ABI_VERSION_MINOR,
                                       "bad spec", count, at, create};

RKV_PLUGIN_EXPORT const rkv_plugin_library* rkv_plugin_library_get(uint32_t major, uint32_t minor) {
  (void)major; (void)minor;
  return &lib;
}
