// Builds the one request of a test plan from the options: headers, a body from a file, or a
// multipart/form-data upload of a file (S3's upload). Also the byte count it puts on the wire.
#pragma once

#include <cstddef>
#include <string>

#include <sluice/client.h>

#include "options.h"

namespace sluice::load {

/// A multipart/form-data body with one file part (RFC 7578) and the boundary it uses.
std::string multipart_body(const std::string& boundary, const std::string& field, const std::string& filename,
                           const std::string& content);

/// Reads the files the options name. Throws std::runtime_error when one cannot be read.
client_request build_request(const load_options& o);

/// The bytes of the request on the wire as the client writes it (request line, headers, the
/// Host, Content-Length and Connection it adds, body): an estimate for KB/s sent that is exact
/// to within the Host header's spelling.
std::size_t wire_size(const client_request& r, const std::string& host);

/// The bytes of a response on the wire, rebuilt from the parsed response: status line, headers,
/// body. Chunked framing is not counted (the client hands over the decoded body).
std::size_t wire_size(const client_response& r);

} // namespace sluice::load
