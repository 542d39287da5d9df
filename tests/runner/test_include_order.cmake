# The include-order check itself (cmake/check_include_order.cmake) on two fixture trees: it passes the tree that keeps
# the order and refuses the one that breaks each rule, naming every broken include with its file and line.
#   cmake -DCHECKER=<check_include_order.cmake> -DFIXTURES=<include_order_fixture> -DWORK=<scratch folder> -P ...
cmake_minimum_required(VERSION 3.25)

# Runs the checker on <FIXTURES>/<tree>/host with the runner's layers; sets <rc> and <log>.
function(check_tree tree rc log)
  set(rules "${WORK}/${tree}_rules.cmake")
  file(WRITE "${rules}"
    "set(HOST_DIR \"${FIXTURES}/${tree}/host\")\n"
    "set(RUNNER_LAYERS \"plan;compress;decode;tasks;profile;records;report;analyze+run\")\n"
    "set(RUNNER_ENTRY_HEADERS \"plan/config.hpp;run/run.hpp\")\n"
    "set(LOWER_PARTS \"core;model;tokenizer;backend;cache;plugin;eval\")\n"
    "set(TOP_PARTS \"cli;capi;conformance\")\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -DRULES=${rules} -P ${CHECKER}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  set(${rc} ${_rc} PARENT_SCOPE)
  set(${log} "${_out}${_err}" PARENT_SCOPE)
endfunction()

file(MAKE_DIRECTORY "${WORK}")
check_tree(good rc log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the check refused a tree that keeps the include order:\n${log}")
endif()

check_tree(bad rc log)
if(rc EQUAL 0)
  message(FATAL_ERROR "the check passed a tree that breaks the include order:\n${log}")
endif()
foreach(expected
    "host/runner/plan/config.cpp:3: includes \"runner/run/run.hpp\", but plan/ may include only itself and the folders before it"
    "host/runner/stray.cpp: lies in no runner folder"
    "host/core/util.cpp:3: includes \"runner/plan/config.hpp\": core/ lies below the runner"
    "host/cli/cmd.cpp:2: includes \"runner/run/phases.hpp\", which is not an entry header"
    "host/runner/analyze/analyze.cpp:2: includes \"runner/run/run.hpp\", but analyze/ may include only itself and the folders before it"
    "host/runner/compress/cell.inl:3: includes \"runner/run/run.hpp\", but compress/ may include only itself"
    "host/runner/decode/loop.cpp:2: includes \"../run/run.hpp\", which climbs out of its folder"
    "host/runner/plan/deep/extra.cpp: lies in a subfolder of plan/"
    "8 include(s) against docs/ARCHITECTURE.md")
  string(FIND "${log}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the check's report lacks\n  ${expected}\nit said:\n${log}")
  endif()
endforeach()
message(STATUS "include order check: the good tree passes, the bad tree fails naming all 8 faults")
