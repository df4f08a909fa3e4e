# FENCEKIT_THREAD_SAFETY (the thread-safety preset, ./scripts/test --full): clang's
# -Wthread-safety as errors, so that every FENCEKIT_GUARDED_BY member is used under its mutex
# (fencekit/common/mutex.h). Before building, two probes prove the check is live: a guarded
# write without its lock must fail to compile, the same write under MutexLock must compile
# (cmake/thread_safety/probe.cc).
if(NOT FENCEKIT_THREAD_SAFETY)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "FENCEKIT_THREAD_SAFETY needs clang (the thread-safety preset uses clang++-16)")
endif()
set(FENCEKIT_THREAD_SAFETY_FLAGS -Wthread-safety -Wthread-safety-beta -Werror)
foreach(probe locked unlocked)
  set(defines ${FENCEKIT_THREAD_SAFETY_FLAGS} -I${CMAKE_CURRENT_LIST_DIR}/../common/include)
  if(probe STREQUAL "unlocked")
    list(APPEND defines -DPROBE_WITHOUT_LOCK)
  endif()
  try_compile(compiled
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/thread_safety/probe.cc
    COMPILE_DEFINITIONS ${defines}
    CXX_STANDARD 20
    OUTPUT_VARIABLE probe_output)
  if(probe STREQUAL "unlocked" AND compiled)
    message(FATAL_ERROR "the thread-safety analysis is not active: a write to a guarded member "
      "without its mutex compiled (cmake/thread_safety/probe.cc, PROBE_WITHOUT_LOCK)")
  elseif(probe STREQUAL "locked" AND NOT compiled)
    message(FATAL_ERROR "the thread-safety probe with the mutex held did not compile:\n"
      "${probe_output}")
  endif()
endforeach()
message(STATUS "thread-safety analysis: on, as errors (a write without its mutex is refused)")
add_compile_options(${FENCEKIT_THREAD_SAFETY_FLAGS})
