// The closed loop: each user sends the request on its own keep-alive connection of one
// sluice::client, waits for the response, and sends again, until its loops are done or the
// duration is over. All users share the client's own reactor loop (one thread; uring where it
// runs, else epoll): that is what lets one core hold 10,000+ users, one fd each.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <sluice/client.h>

#include "options.h"
#include "summary.h"

namespace sluice::load {

struct run_result {
    std::vector<sample> samples;
    double elapsed_s = 0;
    std::uint64_t bytes_received = 0;
    std::uint64_t bytes_sent = 0;
};

/// What an outcome of a call counts as in the Summary Report.
error_kind classify(const result<client_response>& r) noexcept;

/// Runs the plan; `progress` (may be null) gets a line per second.
run_result run(const load_options& o, const client_request& request, std::ostream* progress);

} // namespace sluice::load
