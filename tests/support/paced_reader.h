// A reader slower than the server, for the backpressure tests: it waits first (a server or
// gateway without backpressure would queue or pull the whole body meanwhile), then reads what
// arrives with a short pause every few MiB. It reads through test_client, so the same case
// paces itself over TLS on the {tls} rows of the matrix.
//
//   bool eof = false;
//   std::string raw = read_paced(c, 60s, [&](const std::string& raw, std::size_t fresh) {
//       return raw.find("\r\n0\r\n\r\n", fresh) != std::string::npos;
//   }, eof);
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "support/test_client.h"

namespace sluice::test {

struct pacing {
    std::chrono::milliseconds first_pause{300};
    std::size_t pause_every = std::size_t{4} << 20;
    std::chrono::milliseconds pause{20};
};

/// Reads until `whole(raw, fresh_from)` is true (fresh_from: where the bytes of the last read
/// start, less a few, so that a check can look at the new bytes only and stay linear), the
/// peer closes (`eof` = true) or `limit` passes. Returns every byte read.
std::string read_paced(test_client& c, std::chrono::milliseconds limit,
                       const std::function<bool(const std::string& raw, std::size_t fresh_from)>& whole,
                       bool& eof, pacing p = {});

} // namespace sluice::test
