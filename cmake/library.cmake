# fencekit_library(NAME SOURCES...): the static library fencekit_NAME, known to users as
# fencekit::NAME (in this build and once installed), with its public headers in include/.
function(fencekit_library name)
  add_library(fencekit_${name} STATIC ${ARGN})
  add_library(fencekit::${name} ALIAS fencekit_${name})
  set_target_properties(fencekit_${name} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(fencekit_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>)
endfunction()
