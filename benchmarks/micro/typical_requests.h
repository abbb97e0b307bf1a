// Requests shared by the microbenchmarks, so that the parse figure and the whole-path figure
// are measured on the same bytes.
#pragma once

#include <string_view>

namespace sluice::bench {

// ~300 bytes: what a browser sends for a page's API call without cookies (Firefox 128).
inline constexpr std::string_view typical_get = "GET / HTTP/1.1\r\n"
                                                "Host: api.example.com\r\n"
                                                "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) "
                                                "Gecko/20100101 Firefox/128.0\r\n"
                                                "Accept: application/json, text/plain, */*\r\n"
                                                "Accept-Language: en-US,en;q=0.5\r\n"
                                                "Accept-Encoding: gzip, deflate, br\r\n"
                                                "Referer: https://example.com/\r\n"
                                                "Connection: keep-alive\r\n"
                                                "\r\n";

} // namespace sluice::bench
