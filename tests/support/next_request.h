// A connection still in step after a response: a second request gets exactly its own answer.
// For tests about framing, where a wrong length would leave bytes that a keep-alive connection
// reads as the start of the next response.
//
//   route_next(srv());          // GET /next answers "next"
//   ...                         // a response on c
//   expect_next_answered(c);
#pragma once

#include "support/test_client.h"
#include "support/test_server.h"

namespace sluice::test {

/// Routes GET /next, answered 200 "next".
void route_next(test_server& s);
/// Sends GET /next on c: the answer must be exactly 200 "next", with nothing after it.
void expect_next_answered(test_client& c);

} // namespace sluice::test
