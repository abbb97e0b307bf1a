#include "response_reader.h"

#include <llhttp.h>

#include <cctype>

namespace sluice::fuzz {

namespace {

struct reader_state {
    const std::function<bool(std::size_t)>* head_request;
    std::vector<read_response>* out;
    read_response current;
    std::size_t finals = 0;
    bool in_value = false;
};

reader_state& state(llhttp_t* p) {
    return *static_cast<reader_state*>(p->data);
}

int on_message_begin(llhttp_t* p) {
    state(p).current = {};
    state(p).in_value = false;
    return 0;
}

int on_header_field(llhttp_t* p, const char* at, std::size_t n) {
    reader_state& s = state(p);
    if (s.in_value || s.current.headers.empty()) {
        s.current.headers.emplace_back();
        s.in_value = false;
    }
    for (std::size_t i = 0; i < n; ++i) {
        s.current.headers.back().first.push_back(
            static_cast<char>(std::tolower(static_cast<unsigned char>(at[i]))));
    }
    return 0;
}

int on_header_value(llhttp_t* p, const char* at, std::size_t n) {
    reader_state& s = state(p);
    s.in_value = true;
    s.current.headers.back().second.append(at, n);
    return 0;
}

int on_headers_complete(llhttp_t* p) {
    reader_state& s = state(p);
    s.current.status = p->status_code;
    // Return 1: "this response has no body" (llhttp's way of being told the request was HEAD).
    return p->status_code >= 200 && (*s.head_request)(s.finals) ? 1 : 0;
}

int on_body(llhttp_t* p, const char* at, std::size_t n) {
    state(p).current.body.append(at, n);
    return 0;
}

int on_message_complete(llhttp_t* p) {
    reader_state& s = state(p);
    s.current.keep_alive = llhttp_should_keep_alive(p) != 0;
    if (s.current.status >= 200) {
        ++s.finals;
    }
    s.out->push_back(std::move(s.current));
    s.current = {};
    return 0;
}

} // namespace

std::vector<std::string_view> read_response::values(std::string_view name) const {
    std::vector<std::string_view> v;
    for (const auto& [n, value] : headers) {
        if (n == name) {
            v.emplace_back(value);
        }
    }
    return v;
}

std::string read_responses(std::string_view bytes, const std::function<bool(std::size_t)>& head_request,
                           std::vector<read_response>& out) {
    llhttp_settings_t settings;
    llhttp_settings_init(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_header_field = on_header_field;
    settings.on_header_value = on_header_value;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;
    llhttp_t parser;
    llhttp_init(&parser, HTTP_RESPONSE, &settings);
    reader_state s{&head_request, &out, {}, 0, false};
    parser.data = &s;
    llhttp_errno_t err = llhttp_execute(&parser, bytes.data(), bytes.size());
    if (err == HPE_OK) {
        err = llhttp_finish(&parser); // a body delimited by the close ends here
    }
    if (err != HPE_OK) {
        const char* pos = llhttp_get_error_pos(&parser);
        const std::size_t at = pos == nullptr ? bytes.size() : static_cast<std::size_t>(pos - bytes.data());
        const char* reason = llhttp_get_error_reason(&parser);
        return std::string(llhttp_errno_name(err)) + " (" + (reason != nullptr ? reason : "") + ") at byte " +
               std::to_string(at) + " after " + std::to_string(out.size()) + " responses";
    }
    return {};
}

} // namespace sluice::fuzz
