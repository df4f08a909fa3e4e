# cmake --install: headers, the libraries (with the internal archives they need), fenced,
# fencectl and fencekit-demo, the guard as SQL (share/fencekit/sql/), as a Redis function
# library (share/fencekit/lua/) and as a shell script for etcd (share/fencekit/etcd/), a
# fencekitConfig.cmake exporting the fencekit:: targets, and
# fencekit.pc for pkg-config.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(fencekit_sqlite_util PROPERTIES EXPORT_NAME internal_sqlite_util)
set_target_properties(fencekit_asio PROPERTIES EXPORT_NAME internal_asio)
set_target_properties(fencekit_wire PROPERTIES EXPORT_NAME internal_wire)
set_target_properties(fencekit_prometheus PROPERTIES EXPORT_NAME internal_prometheus)
set_target_properties(fencekit_httpclient PROPERTIES EXPORT_NAME internal_httpclient)
set_target_properties(fencekit_timeline PROPERTIES EXPORT_NAME internal_timeline)

install(TARGETS
    fencekit_common fencekit_lockclient fencekit_fencedstore fencekit_storeclient
    fencekit_server fencekit_fencing fencekit_procutil fencekit_pausetest
    fencekit_store_api fencekit_sqlite_util fencekit_asio fencekit_wire fencekit_prometheus
    fencekit_httpclient fencekit_timeline
  EXPORT fencekitTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS fenced fencectl fencekit-demo RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The guard in your own database (docs/guard-in-your-database.md): every file of
# fencedstore/sql/ (postgresql-guard.sql, mariadb-guard.sql, sqlite-guard.sql).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/fencedstore/sql/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/fencekit/sql)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/fencedstore/lua/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/fencekit/lua)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/fencedstore/etcd/fencekit-etcd-guard.sh
        DESTINATION ${CMAKE_INSTALL_DATADIR}/fencekit/etcd)
foreach(module common lockclient fencedstore fencedstore/api httpapi fencing procutil pausetest)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${module}/include/
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()

set(fencekit_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/fencekit)
install(EXPORT fencekitTargets NAMESPACE fencekit:: DESTINATION ${fencekit_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/fencekitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fencekitConfig.cmake INSTALL_DESTINATION ${fencekit_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fencekitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fencekitConfig.cmake
              ${PROJECT_BINARY_DIR}/fencekitConfigVersion.cmake
        DESTINATION ${fencekit_cmake_dir})

configure_file(${PROJECT_SOURCE_DIR}/cmake/fencekit.pc.in ${PROJECT_BINARY_DIR}/fencekit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fencekit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
