// The number of descriptors this process has open (/proc/self/fd), for the cases that check
// nothing leaks: take it before, and wait for it to come back after.
#pragma once

#include <cstddef>

namespace sluice::test {

std::size_t open_fds();

} // namespace sluice::test
