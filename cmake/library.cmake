# fencekit_library(NAME SOURCES...): the static library fencekit_NAME, known to users as
# fencekit::NAME (in this build and once installed), with its public headers in include/. It
# requires C++20 of whoever links it (its headers use it), so a user's target needs to name no
# standard.
function(fencekit_library name)
  add_library(fencekit_${name} STATIC ${ARGN})
  add_library(fencekit::${name} ALIAS fencekit_${name})
  set_target_properties(fencekit_${name} PROPERTIES EXPORT_NAME ${name})
  target_compile_features(fencekit_${name} PUBLIC cxx_std_20)
  target_include_directories(fencekit_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>)
endfunction()

# fencekit_cold(TARGET...): code off the hot paths (command lines, the demo, the pause kit, child
# processes, timelines, the metrics text) built with -O1 in Release: it compiles faster (the
# demo's three programs build in about half the time, docs/testing.md) and runs where a
# microsecond does not matter. The hot paths (fencedstore, the server, the clients) keep -O2,
# which docs/benchmarks.md measures.
function(fencekit_cold)
  foreach(target ${ARGN})
    target_compile_options(${target} PRIVATE $<$<CONFIG:Release>:-O1>)
  endforeach()
endfunction()
