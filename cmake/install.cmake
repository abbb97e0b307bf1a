# `cmake --install`: the public headers, one static library (libsluice.a: the core, the
# registered backends and the llhttp engine together, so that an application links one
# archive and never meets the core <-> backends cycle of the build tree), an exported CMake
# package (find_package(sluice) + target_link_libraries(app sluice::sluice)) and sluice.pc.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SLUICE_BUNDLED sluice_core sluice_backends llhttp)
foreach(b blocking epoll uring)
    if(TARGET sluice_backend_${b})
        list(APPEND SLUICE_BUNDLED sluice_backend_${b})
    endif()
endforeach()
set(SLUICE_BUNDLE_OBJECTS)
foreach(t ${SLUICE_BUNDLED})
    list(APPEND SLUICE_BUNDLE_OBJECTS $<TARGET_OBJECTS:${t}>)
endforeach()
add_library(sluice_installed STATIC ${SLUICE_BUNDLE_OBJECTS})
set_target_properties(sluice_installed PROPERTIES OUTPUT_NAME sluice EXPORT_NAME sluice LINKER_LANGUAGE CXX)
target_compile_features(sluice_installed INTERFACE cxx_std_20)
target_include_directories(sluice_installed INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# The public headers include fmt (sluice/log.h); the TLS layer calls OpenSSL; liburing is what
# the uring backend calls.
set(SLUICE_PC_LIBS "-lsluice")
target_link_libraries(sluice_installed INTERFACE fmt::fmt Threads::Threads OpenSSL::SSL OpenSSL::Crypto)
if(TARGET sluice_backend_uring)
    target_link_libraries(sluice_installed INTERFACE $<INSTALL_INTERFACE:uring>)
    string(APPEND SLUICE_PC_LIBS " -luring")
endif()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/sluice DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(TARGETS sluice_installed EXPORT sluice-targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(EXPORT sluice-targets NAMESPACE sluice:: FILE sluice-targets.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/sluice-config.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/sluice-config.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/sluice-config-version.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sluice-config.cmake ${CMAKE_CURRENT_BINARY_DIR}/sluice-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice COMPONENT dev)
configure_file(${PROJECT_SOURCE_DIR}/cmake/sluice.pc.in ${CMAKE_CURRENT_BINARY_DIR}/sluice.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sluice.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# The apps (component `apps`): the sample servers and sluice-load, when built. sluice-load's
# install rule is in benchmarks/load/, where its target is made.
if(SLUICE_BUILD_APPS)
    install(TARGETS sluice-gateway sluice-slow-backend sluice-hello sluice-fastio
            RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT apps)
endif()

# Two .debs (cpack -G DEB in the build directory; the install.deb_package test checks them):
#   libsluice-dev  the headers, libsluice.a, the CMake package and sluice.pc (component dev)
#   sluice-apps    the binaries (component apps), its Depends computed by dpkg-shlibdeps
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sluice)
set(CPACK_PACKAGE_CONTACT "sluice maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "sluice: a C++20 HTTP/1.1 server framework")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL dev)
if(SLUICE_BUILD_APPS)
    list(APPEND CPACK_COMPONENTS_ALL apps)
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libsluice-dev)
set(CPACK_COMPONENT_DEV_DESCRIPTION "sluice: a C++20 HTTP/1.1 server framework (headers, static library, CMake package)")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libfmt-dev, libssl-dev, liburing-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_APPS_PACKAGE_NAME sluice-apps)
set(CPACK_COMPONENT_APPS_DESCRIPTION "sluice: sample servers (sluice-gateway, sluice-hello, ...) and sluice-load")
set(CPACK_DEBIAN_APPS_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_APPS_PACKAGE_SECTION net)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
