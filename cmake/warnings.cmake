# Warnings are errors in the project's own code; third-party sources (llhttp) get their own flags.
add_library(sluice_warnings INTERFACE)
target_compile_options(sluice_warnings INTERFACE
    -Wall -Wextra -Wpedantic -Werror
    -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual
    -Wconversion -Wsign-conversion -Wnull-dereference -Wdouble-promotion -Wformat=2
    -Wimplicit-fallthrough)
