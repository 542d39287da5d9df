/* Test fixture: a shared library without the rkv_plugin_library_get entry symbol. */
#include <ripplekv/plugin.h>

RKV_PLUGIN_EXPORT int not_a_plugin(void) { return 1; }
