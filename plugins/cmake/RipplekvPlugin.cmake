# ripplekv_add_plugin(<name> SOURCES <src>... [LINK_LIBRARIES <lib>...] [NO_INSTALL])
#
# Builds one ripplekv plugin library (a MODULE .so named <name>.so, no "lib" prefix) against the plugin SDK.
# Only the entry symbol rkv_plugin_library_get is exported (-fvisibility=hidden, as docs/ARCHITECTURE.md "Plugin ABI" asks).
# In the ripplekv tree the library lands in build/lib/ripplekv/plugins and is installed to
# <libdir>/ripplekv/plugins. Out of tree (after find_package(ripplekv), which includes this file and links the imported
# ripplekv::sdk) it lands in the caller's binary folder (or CMAKE_LIBRARY_OUTPUT_DIRECTORY), and `cmake --install`
# puts it in <prefix>/<libdir>/ripplekv/plugins of the caller's prefix: the host finds it there without
# RIPPLEKV_PLUGIN_PATH when that prefix is ripplekv's own. NO_INSTALL skips the install rule.
function(ripplekv_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "" "SOURCES;LINK_LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "ripplekv_add_plugin(${name}): SOURCES is required")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    CXX_STANDARD 17
    CXX_STANDARD_REQUIRED ON
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(${name} PRIVATE ripplekv::sdk ${ARG_LINK_LIBRARIES})
  if(DEFINED RIPPLEKV_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${RIPPLEKV_PLUGIN_OUTPUT_DIR})
  endif()
  if(NOT ARG_NO_INSTALL AND DEFINED RIPPLEKV_INSTALL_PLUGIN_DIR)
    install(TARGETS ${name} LIBRARY DESTINATION ${RIPPLEKV_INSTALL_PLUGIN_DIR})
  endif()
endfunction()
