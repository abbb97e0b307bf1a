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
        FILES_MATCHING PATTERN "*.h")
install(TARGETS sluice_installed EXPORT sluice-targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT sluice-targets NAMESPACE sluice:: FILE sluice-targets.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/sluice-config.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/sluice-config.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/sluice-config-version.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sluice-config.cmake ${CMAKE_CURRENT_BINARY_DIR}/sluice-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
configure_file(${PROJECT_SOURCE_DIR}/cmake/sluice.pc.in ${CMAKE_CURRENT_BINARY_DIR}/sluice.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sluice.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# A .deb of the same files (cpack -G DEB in the build directory).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME libsluice-dev)
set(CPACK_PACKAGE_CONTACT "sluice maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "sluice: a C++20 HTTP/1.1 server framework (headers, static library)")
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libfmt-dev, libssl-dev, liburing-dev")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
