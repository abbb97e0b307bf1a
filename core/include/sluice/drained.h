// co_await sluice::drained(ex): the backpressure of a coroutine that streams its response.
//
//   srv.get("/export", [](sluice::exchange& ex) -> sluice::task<> {
//       while (auto piece = next_piece()) {
//           ex.response().write(*piece);
//           if (auto ec = co_await sluice::drained(ex)) {
//               co_return;      // cancelled: the client left, the async timeout fired, the server stops
//           }
//       }
//   });
//
// It sends what the coroutine wrote with response::write() since the last piece went out (the
// head first, when it has not gone out), then waits until the connection's queued output is at
// or below output_low_water, so that a slow reader holds back the coroutine instead of piling
// the body up in memory (async_context::on_drained, which the callback styles use). Gives an
// empty std::error_code when the output has drained, std::errc::operation_canceled when the
// exchange ended first. Only in a coroutine handler (its exchange is suspended throughout).
#pragma once

#include <sluice/async_op.h>
#include <sluice/exchange.h>

namespace sluice {

/// Sends what was written and waits for the connection's output to drain (see above).
async_op<void> drained(const exchange& ex);

} // namespace sluice
