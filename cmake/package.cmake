# The Debian package: scripts/package (cpack -G DEB in the build folder) makes
# fencekit_<version>_amd64.deb of everything cmake --install installs (the three programs, the
# libraries, headers, CMake and pkg-config files, share/fencekit/), plus man pages made from the
# programs' --help (help2man; the target fencekit_man) and fenced as a systemd service
# (packaging/: the unit, /etc/default/fenced, the maintainer scripts). Installed to /usr.

# The man pages, from --help and --version: built by scripts/package (target fencekit_man), not
# by default.
find_program(FENCEKIT_HELP2MAN help2man)
set(fencekit_man_dir ${PROJECT_BINARY_DIR}/man)
set(fencekit_man_pages)
foreach(entry
    "fenced|a key-value store over HTTP that refuses writes carrying a stale fencing token"
    "fencectl|locks with fencing tokens, and fenced writes, from a shell"
    "fencekit-demo|why a lock is not enough: Kleppmann's argument with real processes")
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 prog)
  list(GET parts 1 what)
  set(page ${fencekit_man_dir}/${prog}.1)
  add_custom_command(OUTPUT ${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${fencekit_man_dir}
    COMMAND ${FENCEKIT_HELP2MAN} --no-info --section=1 --name=${what} --output=${page}
      $<TARGET_FILE:${prog}>
    COMMAND gzip -9nf ${page}
    DEPENDS ${prog}
    COMMENT "Man page ${prog}(1)"
    VERBATIM)
  list(APPEND fencekit_man_pages ${page}.gz)
endforeach()
if(FENCEKIT_HELP2MAN)
  add_custom_target(fencekit_man DEPENDS ${fencekit_man_pages})
else()
  add_custom_target(fencekit_man COMMAND ${CMAKE_COMMAND} -E echo
    "help2man is missing: apt-get install help2man (scripts/package does)" COMMAND false)
endif()

# Only in the package: the service's unit and settings name /usr/bin/fenced and /etc.
install(FILES ${fencekit_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
  COMPONENT package EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/fenced.service DESTINATION lib/systemd/system
  COMPONENT package EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/fenced.default DESTINATION /etc/default
  RENAME fenced COMPONENT package EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME fencekit)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR fencekit)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "distributed locks with fencing tokens, and a store that refuses stale writes")
set(CPACK_PACKAGE_DESCRIPTION
  "fenced, an HTTP key-value store that refuses a write carrying a fencing token lower than one \
it accepted; fencectl, leases with fencing tokens from SQLite, Redis, Redlock or etcd, and \
fenced writes from a shell; fencekit-demo, the argument shown with real processes. With the \
C++ libraries, headers, CMake and pkg-config files, and the guard for PostgreSQL, MariaDB, \
SQLite, Redis and etcd (share/fencekit).")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "fencekit maintainers <fencekit@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION database)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # fencekit_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)    # Depends: from the programs' shared libraries
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "redis-server, etcd-server, postgresql")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_SET_DESTDIR ON)                 # /etc/default/fenced is absolute
# Every component (the package-only one too) in the one package.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL Unspecified package)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/packaging/conffiles ${PROJECT_SOURCE_DIR}/packaging/postinst
  ${PROJECT_SOURCE_DIR}/packaging/prerm ${PROJECT_SOURCE_DIR}/packaging/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
