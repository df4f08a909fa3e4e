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
