// Response serialization: exact bytes for the common cases, the framing rules (HEAD, 1xx,
// 204, 304, HTTP/1.0, keep-alive), the headers the server owns, and streaming. A response
// parser (llhttp) checks that what we write frames the way a client will read it.
#include <gtest/gtest.h>
#include <llhttp.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <sluice/response.h>

#include "http/server_session.h"

namespace sluice::http {
namespace {

constexpr std::string_view date = "Sun, 06 Nov 1994 08:49:37 GMT";
constexpr response_framing http11{{1, 1}, false, true};
constexpr response_framing http11_close{{1, 1}, false, false};
constexpr response_framing http10{{1, 0}, false, false};
constexpr response_framing http10_keep{{1, 0}, false, true};
constexpr response_framing head11{{1, 1}, true, true};

std::string serialize(const response& r, const response_framing& f, std::string_view d = date) {
    std::string out;
    serialize_response(r, f, d, out);
    return out;
}

/// What a client's parser makes of the bytes.
struct client_view {
    bool complete = false;
    int status = 0;
    std::string body;
    std::size_t consumed = 0;
    bool keep_alive = false;
};

int on_body(llhttp_t* p, const char* at, std::size_t n) {
    static_cast<client_view*>(p->data)->body.append(at, n);
    return 0;
}
int on_complete(llhttp_t* p) {
    static_cast<client_view*>(p->data)->complete = true;
    return HPE_PAUSED;
}
int skip_body(llhttp_t*) {
    return 1;
} // a HEAD response: the client knows there is no body

client_view parse_as_client(std::string_view bytes, bool head_request = false) {
    llhttp_settings_t settings;
    llhttp_settings_init(&settings);
    settings.on_body = on_body;
    settings.on_message_complete = on_complete;
    if (head_request) {
        settings.on_headers_complete = skip_body;
    }
    llhttp_t p;
    llhttp_init(&p, HTTP_RESPONSE, &settings);
    client_view v;
    p.data = &v;
    const llhttp_errno_t err = llhttp_execute(&p, bytes.data(), bytes.size());
    v.consumed =
        err == HPE_PAUSED ? static_cast<std::size_t>(llhttp_get_error_pos(&p) - bytes.data()) : bytes.size();
    v.status = p.status_code;
    v.keep_alive = llhttp_should_keep_alive(&p) != 0;
    if (!v.complete && err == HPE_OK && llhttp_message_needs_eof(&p) != 0) {
        v.complete = llhttp_finish(&p) == HPE_OK || v.complete; // delimited by close
    }
    return v;
}

TEST(Serializer, WritesASmallResponseExactly) {
    response r;
    r.text("hello");
    EXPECT_EQ(serialize(r, http11), "HTTP/1.1 200 OK\r\n"
                                    "Content-Type: text/plain; charset=utf-8\r\n"
                                    "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                                    "Content-Length: 5\r\n"
                                    "\r\n"
                                    "hello");
}

TEST(Serializer, AppendsToWhatIsAlreadyQueued) {
    std::string out = "previous";
    serialize_response(response{404}, http11, date, out);
    EXPECT_EQ(out, "previousHTTP/1.1 404 Not Found\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                   "Content-Length: 0\r\n\r\n");
}

TEST(Serializer, AnswersEveryVersionWithHttp11) {
    EXPECT_EQ(serialize(response{}, http10).rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
}

TEST(Serializer, SaysConnectionOnlyWhenItDiffersFromTheVersionDefault) {
    EXPECT_EQ(serialize(response{}, http11).find("Connection"), std::string::npos);
    EXPECT_NE(serialize(response{}, http11_close).find("\r\nConnection: close\r\n"), std::string::npos);
    EXPECT_NE(serialize(response{}, http10_keep).find("\r\nConnection: keep-alive\r\n"), std::string::npos);
    EXPECT_EQ(serialize(response{}, http10).find("Connection"), std::string::npos);
}

TEST(Serializer, HeadKeepsContentLengthButSendsNoBody) {
    response r;
    r.text("twelve bytes");
    const std::string out = serialize(r, head11);
    EXPECT_NE(out.find("\r\nContent-Length: 12\r\n"), std::string::npos);
    EXPECT_TRUE(out.ends_with("\r\n\r\n"));
    EXPECT_EQ(out.find("twelve"), std::string::npos);
    const auto client = parse_as_client(out, true);
    EXPECT_TRUE(client.complete);
    EXPECT_EQ(client.consumed, out.size());
}

TEST(Serializer, StatusesWithoutContentHaveNoLengthAndNoBody) {
    for (const int status : {100, 103, 204, 304}) {
        response r{status};
        r.body("must not be sent");
        const std::string out = serialize(r, http11);
        EXPECT_EQ(out.find("Content-Length"), std::string::npos) << status;
        EXPECT_EQ(out.find("must not"), std::string::npos) << status;
        EXPECT_TRUE(out.ends_with("\r\n\r\n")) << status;
        EXPECT_EQ(serialize(r, head11), out) << status;
    }
    EXPECT_EQ(serialize(response{204}, http11),
              "HTTP/1.1 204 No Content\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n");
    EXPECT_EQ(
        serialize(response{304}, http11_close),
        "HTTP/1.1 304 Not Modified\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: close\r\n\r\n");
}

TEST(Serializer, SendsAStatusOutsideTheRangeAs500) {
    for (const int status : {-1, 0, 99, 600, 1000}) {
        EXPECT_EQ(serialize(response{status}, http11).rfind("HTTP/1.1 500 Internal Server Error\r\n", 0), 0u)
            << status;
    }
    EXPECT_EQ(serialize(response{599}, http11).rfind("HTTP/1.1 599 Unknown\r\n", 0), 0u);
    EXPECT_EQ(serialize(response{100}, http11).rfind("HTTP/1.1 100 Continue\r\n", 0), 0u);
}

TEST(Serializer, ReplacesTheFramingHeadersAHandlerSet) {
    response r;
    r.header("X-Before", "1")
        .header("content-length", "999")
        .header("Transfer-Encoding", "chunked")
        .header("CONNECTION", "keep-alive")
        .add_header("Set-Cookie", "a=1")
        .add_header("Set-Cookie", "b=2")
        .body("abc");
    EXPECT_EQ(serialize(r, http11_close), "HTTP/1.1 200 OK\r\n"
                                          "X-Before: 1\r\n"
                                          "Set-Cookie: a=1\r\n"
                                          "Set-Cookie: b=2\r\n"
                                          "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                                          "Content-Length: 3\r\n"
                                          "Connection: close\r\n"
                                          "\r\n"
                                          "abc");
}

TEST(Serializer, KeepsAHandlersDateAndAddsNoSecond) {
    response r;
    r.header("date", "Mon, 07 Nov 1994 00:00:00 GMT");
    const std::string out = serialize(r, http11);
    EXPECT_NE(out.find("date: Mon, 07 Nov 1994 00:00:00 GMT\r\n"), std::string::npos);
    EXPECT_EQ(out.find("Date:"), std::string::npos);
}

TEST(Serializer, AnEmptyDateMeansNoDateHeader) {
    EXPECT_EQ(serialize(response{}, http11, ""), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
}

TEST(Serializer, WritesLargeLengthsInDecimal) {
    response r;
    r.body(std::string(1234567, 'x'));
    const std::string out = serialize(r, http11);
    EXPECT_NE(out.find("\r\nContent-Length: 1234567\r\n"), std::string::npos);
    const auto client = parse_as_client(out);
    EXPECT_TRUE(client.complete);
    EXPECT_EQ(client.body.size(), 1234567u);
}

TEST(Serializer, AClientReadsBackExactlyOneResponse) {
    response r{201};
    r.json(R"({"id":1})");
    const std::string out = serialize(r, http11) + "HTTP/1.1 200 OK\r\n";
    const auto client = parse_as_client(out);
    EXPECT_TRUE(client.complete);
    EXPECT_EQ(client.status, 201);
    EXPECT_EQ(client.body, R"({"id":1})");
    EXPECT_EQ(client.consumed, out.size() - 17);
    EXPECT_TRUE(client.keep_alive);
}

// --- streaming ---

TEST(SerializerStream, Http11StreamsChunked) {
    response r;
    r.header("Content-Length", "5").content_type("text/event-stream").write("x");
    std::string out;
    serialize_stream_head(r, http11, date, out);
    EXPECT_EQ(out, "HTTP/1.1 200 OK\r\n"
                   "Content-Type: text/event-stream\r\n"
                   "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                   "Transfer-Encoding: chunked\r\n"
                   "\r\n");
    serialize_chunk("hello", http11, out);
    serialize_chunk("", http11, out); // nothing: an empty chunk would end the stream
    serialize_chunk(std::string(300, 'z'), http11, out);
    serialize_stream_end(http11, out);
    EXPECT_NE(out.find("\r\n\r\n5\r\nhello\r\n12c\r\nzzz"), std::string::npos);
    EXPECT_TRUE(out.ends_with("zzz\r\n0\r\n\r\n"));
    const auto client = parse_as_client(out);
    EXPECT_TRUE(client.complete);
    EXPECT_EQ(client.body, "hello" + std::string(300, 'z'));
    EXPECT_EQ(client.consumed, out.size());
}

TEST(SerializerStream, Http11CloseSaysSo) {
    std::string out;
    serialize_stream_head(response{}, http11_close, date, out);
    EXPECT_NE(out.find("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"), std::string::npos);
}

TEST(SerializerStream, Http10StreamsRawBytesUntilClose) {
    for (const response_framing& f : {http10, http10_keep}) {
        std::string out;
        serialize_stream_head(response{}, f, date, out);
        EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n");
        serialize_chunk("abc", f, out);
        serialize_chunk("def", f, out);
        serialize_stream_end(f, out);
        EXPECT_TRUE(out.ends_with("\r\n\r\nabcdef"));
        const auto client = parse_as_client(out);
        EXPECT_TRUE(client.complete);
        EXPECT_EQ(client.body, "abcdef");
        EXPECT_FALSE(client.keep_alive);
    }
}

TEST(SerializerStream, HeadGetsTheHeadOnly) {
    std::string out;
    serialize_stream_head(response{}, head11, date, out);
    const std::size_t head_size = out.size();
    EXPECT_NE(out.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
    serialize_chunk("data", head11, out);
    serialize_stream_end(head11, out);
    EXPECT_EQ(out.size(), head_size);
}

TEST(SerializerStream, NoChunkedFramingForAStatusWithoutContent) {
    std::string out;
    serialize_stream_head(response{204}, http11, date, out);
    EXPECT_EQ(out.find("Transfer-Encoding"), std::string::npos);
}

TEST(SerializerStream, AStatusWithoutContentGetsNoChunksAndNoLastChunk) {
    // RFC 9110 §6.4.1: the message ends with its head; chunk framing after it would be read
    // as the start of the next response (RFC 9112 §6.3 rule 1).
    for (const int status : {204, 304}) {
        for (response_framing f : {http11, http10}) {
            f.no_content = true;
            std::string out;
            serialize_stream_head(response{status}, f, date, out);
            const std::size_t head_size = out.size();
            serialize_chunk("data", f, out);
            serialize_stream_end(f, out);
            EXPECT_EQ(out.size(), head_size) << status << ": " << out;
            const auto client = parse_as_client(out, false);
            EXPECT_TRUE(client.complete) << status;
            EXPECT_EQ(client.consumed, out.size()) << status;
        }
    }
}

TEST(SerializerStream, ADeclaredLengthFramesTheStreamWithContentLength) {
    for (response_framing f : {http11, http10_keep}) {
        f.content_length = 11;
        response r;
        r.header("Content-Length", "3").header("Transfer-Encoding", "chunked");
        std::string out;
        serialize_stream_head(r, f, date, out);
        EXPECT_EQ(out.find("Transfer-Encoding"), std::string::npos) << out;
        EXPECT_EQ(out.find("Content-Length: 3"), std::string::npos) << out;
        EXPECT_NE(out.find("\r\nContent-Length: 11\r\n"), std::string::npos) << out;
        EXPECT_EQ(out.find("Connection: keep-alive") != std::string::npos, f.version.minor == 0) << out;
        serialize_chunk("hello ", f, out);
        serialize_chunk("world", f, out);
        serialize_stream_end(f, out);
        EXPECT_TRUE(out.ends_with("\r\n\r\nhello world")) << out;
        const auto client = parse_as_client(out);
        EXPECT_TRUE(client.complete);
        EXPECT_EQ(client.body, "hello world");
        EXPECT_EQ(client.consumed, out.size());
        EXPECT_TRUE(client.keep_alive);
    }
}

TEST(SerializerStream, ADeclaredLengthOfAnyUint64IsWrittenInFull) {
    response_framing f = http11;
    f.content_length = UINT64_MAX;
    std::string out;
    serialize_stream_head(response{}, f, date, out);
    EXPECT_NE(out.find("\r\nContent-Length: 18446744073709551615\r\n"), std::string::npos) << out;
}

TEST(SerializerStream, ADeclaredLengthOnHeadOr204) {
    response_framing head = head11;
    head.content_length = 10;
    std::string out;
    serialize_stream_head(response{}, head, date, out);
    const std::size_t head_size = out.size();
    EXPECT_NE(out.find("\r\nContent-Length: 10\r\n"), std::string::npos) << out;
    serialize_chunk("0123456789", head, out);
    EXPECT_EQ(out.size(), head_size);

    response_framing none = http11;
    none.content_length = 10;
    none.no_content = true;
    out.clear();
    serialize_stream_head(response{204}, none, date, out);
    EXPECT_EQ(out.find("Content-Length"), std::string::npos) << out;
    EXPECT_EQ(out.find("Transfer-Encoding"), std::string::npos) << out;
}

// --- errors and 100 Continue ---

TEST(SerializerError, WritesAClosingTextResponse) {
    std::string out;
    serialize_error(431, "request header fields too large", {1, 1}, false, date, out);
    EXPECT_EQ(out, "HTTP/1.1 431 Request Header Fields Too Large\r\n"
                   "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                   "Content-Type: text/plain; charset=utf-8\r\n"
                   "Content-Length: 32\r\n"
                   "Connection: close\r\n"
                   "\r\n"
                   "request header fields too large\n");
    const auto client = parse_as_client(out);
    EXPECT_TRUE(client.complete);
    EXPECT_EQ(client.status, 431);
    EXPECT_FALSE(client.keep_alive);
}

TEST(SerializerError, AnswersAHeadWithTheHeadAlone) {
    std::string out;
    serialize_error(400, "bad", {1, 1}, true, date, out);
    EXPECT_EQ(out, "HTTP/1.1 400 Bad Request\r\n"
                   "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                   "Content-Type: text/plain; charset=utf-8\r\n"
                   "Content-Length: 4\r\n"
                   "Connection: close\r\n"
                   "\r\n");
}

TEST(SerializerError, FallsBackToTheReasonPhraseAndTo500) {
    std::string out;
    serialize_error(505, "", {2, 0}, false, date, out);
    EXPECT_EQ(out.rfind("HTTP/1.1 505 HTTP Version Not Supported\r\n", 0), 0u);
    EXPECT_TRUE(out.ends_with("\r\n\r\nHTTP Version Not Supported\n"));
    out.clear();
    serialize_error(42, "x", {1, 0}, false, "", out);
    EXPECT_EQ(out, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain; charset=utf-8\r\n"
                   "Content-Length: 2\r\nConnection: close\r\n\r\nx\n");
}

TEST(SerializerContinue, IsTheInterimResponse) {
    EXPECT_EQ(continue_response(), "HTTP/1.1 100 Continue\r\n\r\n");
}

} // namespace
} // namespace sluice::http
