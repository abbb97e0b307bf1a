#include "request.h"

#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>

namespace sluice::load {

namespace {

std::string read_file(const std::string& path) {
    // stdio rather than istreambuf_iterator: GCC 12's -Wnull-dereference flags the latter.
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) {
        throw std::runtime_error("cannot read '" + path + "'");
    }
    std::string content;
    char buf[65536];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
        content.append(buf, n);
    }
    if (std::ferror(f.get()) != 0) {
        throw std::runtime_error("cannot read '" + path + "'");
    }
    return content;
}

std::string basename_of(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

std::string multipart_body(const std::string& boundary, const std::string& field, const std::string& filename,
                           const std::string& content) {
    std::string b;
    b.reserve(content.size() + 256);
    b += "--" + boundary + "\r\n";
    b += "Content-Disposition: form-data; name=\"" + field + "\"; filename=\"" + filename + "\"\r\n";
    b += "Content-Type: application/octet-stream\r\n\r\n";
    b += content;
    b += "\r\n--" + boundary + "--\r\n";
    return b;
}

client_request build_request(const load_options& o) {
    client_request r;
    r.method = o.method;
    r.target = o.target;
    for (const auto& h : o.headers) {
        r.headers.push_back({h.name, h.value});
    }
    if (!o.body_file.empty()) {
        r.body = read_file(o.body_file);
    } else if (!o.upload_file.empty()) {
        std::string content = read_file(o.upload_file);
        // A boundary that does not occur in the content (RFC 2046 §5.1.1); retry until it is so.
        std::mt19937_64 rng(content.size());
        std::string boundary;
        do {
            std::ostringstream s;
            s << "sluice-load-" << std::hex << rng();
            boundary = s.str();
        } while (content.find(boundary) != std::string::npos);
        r.body = multipart_body(boundary, o.upload_field, basename_of(o.upload_file), content);
        r.headers.push_back({"Content-Type", "multipart/form-data; boundary=" + boundary});
    }
    return r;
}

std::size_t wire_size(const client_request& r, const std::string& host) {
    std::size_t n = r.method.size() + 1 + r.target.size() + 11; // "M T HTTP/1.1\r\n"
    n += 8 + host.size();                                       // "Host: h\r\n"
    for (const auto& h : r.headers) {
        n += h.name.size() + 2 + h.value.size() + 2;
    }
    if (!r.body.empty()) {
        n += 18 + std::to_string(r.body.size()).size() + r.body.size(); // "Content-Length: N\r\n"
    }
    return n + 2;
}

std::size_t wire_size(const client_response& r) {
    std::size_t n = 17; // "HTTP/1.1 200 OK\r\n", give or take the reason phrase
    for (const auto& h : r.headers) {
        n += h.name.size() + 2 + h.value.size() + 2;
    }
    return n + 2 + r.body.size();
}

} // namespace sluice::load
