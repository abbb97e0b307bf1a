// An independent, strict reader of what a server wrote: llhttp in response mode (no lenient
// flags) splits the bytes into responses by their own framing, the way a client would.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::fuzz {

struct read_response {
    int status = 0;
    std::vector<std::pair<std::string, std::string>> headers; ///< names lower-cased
    std::string body;
    bool keep_alive = true; ///< llhttp's verdict: the connection may carry another response

    /// The values of every header of that (lower-case) name.
    std::vector<std::string_view> values(std::string_view name) const;
};

/// Reads all of `bytes` (then end of stream). head_request(i) says whether the i-th final
/// response (1xx not counted) answers a HEAD, whose body the framing announces but omits.
/// Returns "" and fills `out`, or what is wrong.
std::string read_responses(std::string_view bytes, const std::function<bool(std::size_t)>& head_request,
                           std::vector<read_response>& out);

} // namespace sluice::fuzz
