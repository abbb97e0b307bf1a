# Every dependency comes from Debian's packages (scripts/bootstrap installs them).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(OpenSSL REQUIRED)

# llhttp: Debian's node-llhttp ships the generated C sources; compile them into a static library.
set(SLUICE_LLHTTP_SRC /usr/share/llhttp CACHE PATH "llhttp C sources (Debian node-llhttp)")
set(SLUICE_LLHTTP_INCLUDE /usr/share/include/llhttp CACHE PATH "llhttp header (Debian node-llhttp)")
if(NOT EXISTS ${SLUICE_LLHTTP_SRC}/llhttp.c OR NOT EXISTS ${SLUICE_LLHTTP_INCLUDE}/llhttp.h)
    message(FATAL_ERROR "llhttp sources not found in ${SLUICE_LLHTTP_SRC}: install Debian's node-llhttp (scripts/bootstrap)")
endif()
add_library(llhttp STATIC ${SLUICE_LLHTTP_SRC}/llhttp.c ${SLUICE_LLHTTP_SRC}/api.c ${SLUICE_LLHTTP_SRC}/http.c)
target_include_directories(llhttp SYSTEM PUBLIC ${SLUICE_LLHTTP_INCLUDE})
set_target_properties(llhttp PROPERTIES POSITION_INDEPENDENT_CODE ON C_STANDARD 99)
target_compile_options(llhttp PRIVATE -O2 -w)
# Strict mode: llhttp itself rejects what RFC 9112 forbids (whitespace before a colon, ...).
target_compile_definitions(llhttp PRIVATE LLHTTP_STRICT_MODE=1)

# toml++ is header-only (Debian libtomlplusplus-dev).
find_path(SLUICE_TOMLPP_INCLUDE toml++/toml.h REQUIRED)
add_library(tomlplusplus INTERFACE)
target_include_directories(tomlplusplus SYSTEM INTERFACE ${SLUICE_TOMLPP_INCLUDE})

pkg_check_modules(LIBURING IMPORTED_TARGET liburing)
