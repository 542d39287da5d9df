# Install rules of the package as a whole (included last by the top-level CMakeLists.txt): the exported targets
# ripplekv::abi, ripplekv::sdk and ripplekv::ripplekv, the CMake package config (find_package(ripplekv)) with the
# ripplekv_add_plugin() helper, and the pkg-config file ripplekv.pc. Headers, libripplekv, the CLI and the built-in
# plugins have their install rules beside their targets (abi/, plugins/, host/, ripplekv_add_plugin()).
#
# Layout under the prefix (GNUInstallDirs):
#   include/ripplekv/{plugin.h,ripplekv.h,sdk.hpp}   bin/ripplekv   lib/libripplekv.so*   lib/ripplekv/plugins/*.so
#   lib/cmake/ripplekv/{ripplekvConfig.cmake,ripplekvConfigVersion.cmake,ripplekvTargets*.cmake,RipplekvPlugin.cmake}
#   lib/pkgconfig/ripplekv.pc
include(CMakePackageConfigHelpers)

set(RIPPLEKV_INSTALL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ripplekv)

install(EXPORT ripplekvTargets NAMESPACE ripplekv:: DESTINATION ${RIPPLEKV_INSTALL_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ripplekvConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/ripplekvConfig.cmake
  INSTALL_DESTINATION ${RIPPLEKV_INSTALL_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR RIPPLEKV_INSTALL_PLUGIN_DIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/ripplekvConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/package/ripplekvConfig.cmake
  ${PROJECT_BINARY_DIR}/package/ripplekvConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/plugins/cmake/RipplekvPlugin.cmake
  DESTINATION ${RIPPLEKV_INSTALL_CMAKE_DIR})

# pkg-config: prefix is found from the .pc file's own folder (${pcfiledir}), so the installed tree can be moved and
# `cmake --install --prefix` at install time is honoured without reconfiguring.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "ripplekv.pc: CMAKE_INSTALL_LIBDIR must be relative to the prefix (got ${CMAKE_INSTALL_LIBDIR})")
endif()
file(RELATIVE_PATH RIPPLEKV_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" RIPPLEKV_PC_TO_PREFIX "${RIPPLEKV_PC_TO_PREFIX}")
# <ripplekv/plugin.h> includes <dlpack/dlpack.h>: name DLPack's include folder unless it is the compiler's default.
set(RIPPLEKV_PC_EXTRA_CFLAGS "")
get_target_property(_rkv_dlpack_includes dlpack::dlpack INTERFACE_INCLUDE_DIRECTORIES)
foreach(_dir IN LISTS _rkv_dlpack_includes)
  if(_dir AND NOT _dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    string(APPEND RIPPLEKV_PC_EXTRA_CFLAGS " -I${_dir}")
  endif()
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/ripplekv.pc.in ${PROJECT_BINARY_DIR}/package/ripplekv.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/ripplekv.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
