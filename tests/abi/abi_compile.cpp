/* Compiles the public headers in strict C++ and checks the struct_size rule's helper macro. */
#include <ripplekv/plugin.h>
#include <stdio.h>

int main(void) {
  rkv_diagnostics d = {0, NULL, NULL};
  rkv_allocation_request r;
  int failures = 0;
  d.struct_size = (uint32_t)offsetof(rkv_diagnostics, report); /* an "older" writer: report lies outside */
  if (RKV_HAS_FIELD(&d, rkv_diagnostics, report)) ++failures;
  d.struct_size = (uint32_t)sizeof d;
  if (!RKV_HAS_FIELD(&d, rkv_diagnostics, report)) ++failures;
  r.struct_size = (uint32_t)sizeof r;
  if (!RKV_HAS_FIELD(&r, rkv_allocation_request, protected_count)) ++failures;
  if (RKV_ABI_VERSION_MAJOR != 1) ++failures;
  if (failures) printf("%d checks failed\n", failures);
  return failures;
}
