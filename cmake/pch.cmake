# Precompiled headers: the heaviest headers are parsed once per build, not once per source
# (docs/testing.md has the build times with and without). Boost.Beast, Asio and their SSL parts
# (about 18 s of parsing per source on a 2-core machine) for the sources of the server and the
# store client that include them. (lockclient's two such sources are compiled with hiredis's
# -D_FILE_OFFSET_BITS=64, which a shared precompiled header must match: not worth one of their
# own.) The tests' GoogleTest and standard headers are precompiled once in tests/CMakeLists.txt.
add_library(fencekit_beast_pch OBJECT ${CMAKE_CURRENT_LIST_DIR}/pch_beast.cc)
# The configuration of the libraries that reuse it: Asio/Beast compiled separately, and the
# macros of Boost.JSON and Boost.URL (GCC uses a precompiled header only where the macros it
# was made with are defined alike).
target_link_libraries(fencekit_beast_pch PRIVATE fencekit_asio OpenSSL::SSL Boost::json Boost::url)
target_precompile_headers(fencekit_beast_pch PRIVATE
  <boost/asio.hpp> <boost/asio/ssl.hpp> <boost/beast/core.hpp> <boost/beast/http.hpp>
  <boost/beast/ssl.hpp>)

# fencekit_use_beast_pch(TARGET SOURCE...): TARGET's SOURCEs (those that include Beast or Asio)
# use the precompiled header; its other sources are compiled as before.
function(fencekit_use_beast_pch target)
  target_precompile_headers(${target} REUSE_FROM fencekit_beast_pch)
  get_target_property(sources ${target} SOURCES)
  foreach(source ${sources})
    get_filename_component(file ${source} NAME)
    if(NOT file IN_LIST ARGN)
      set_source_files_properties(${source} TARGET_DIRECTORY ${target}
        PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()

fencekit_use_beast_pch(fencekit_server
  health.cc server.cc session.cc framing.cc tls_context.cc handler.cc)
fencekit_use_beast_pch(fencekit_storeclient store_client.cc)
