/* Prints rkv_version() of the linked libripplekv and the plugin ABI version of the headers; exits 0. */
#include <stdio.h>

#include <ripplekv/ripplekv.h>

int main(void) {
  printf("%s %d.%d\n", rkv_version(), RKV_ABI_VERSION_MAJOR, RKV_ABI_VERSION_MINOR);
  return 0;
}
