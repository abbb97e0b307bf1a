// Command line of sluice-connhold (see main.cc for what it does).
#pragma once

#include <cstddef>
#include <string>

namespace connhold {

enum class wait_for { connected, sent, answered };

struct options {
    std::string host = "127.0.0.1";
    int port = 0;
    std::size_t connections = 100;
    std::size_t window = 256;
    std::string request;
    wait_for wait = wait_for::connected;
    long wait_timeout_ms = 60'000;
    long hold_ms = 0;
    bool hold_stdin = false;
    long connect_timeout_ms = 10'000;
    long deadline_ms = 300'000;
    bool close_rst = false;
};

// Parses argv; prints the usage and exits with status 2 on a bad flag.
options parse_options(int argc, char** argv);

// Raises the soft open-file limit to the hard one; exits with status 2 if `needed`
// connections (one fd each) cannot fit under it.
void raise_fd_limit(std::size_t needed);

} // namespace connhold
