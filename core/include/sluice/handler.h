// The type of a request handler.
#pragma once

#include <functional>

namespace sluice {

class exchange;

/// A request handler. It runs on an I/O thread (dispatch = inline) or a worker
/// (dispatch = pool), and may suspend the exchange with exchange::start_async().
using handler = std::function<void(exchange&)>;

} // namespace sluice
