// The request type: arena-backed fields filled by request_builder, the accessors handlers
// use (query, query_param, path_param, header), clear(), and the text helpers.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include <sluice/request.h>

#include "http/request_builder.h"

namespace sluice {
namespace {

using detail::request_builder;

// A request filled the way the session fills it, each field in the given pieces.
request make(std::string_view method, std::vector<std::string_view> target,
             std::vector<std::pair<std::string_view, std::string_view>> headers = {}) {
    request r;
    request_builder b{r};
    b.append_method(method);
    for (const auto piece : target) {
        b.append_target(piece);
    }
    for (const auto& [name, value] : headers) {
        b.begin_header();
        b.append_header_name(name);
        b.append_header_value(value);
        b.finish_header();
    }
    b.finish_target();
    return r;
}

struct param {
    std::string_view name;
    std::string_view value;
};

TEST(RequestBuilder, JoinsPiecesIntoFields) {
    request r;
    request_builder b{r};
    b.append_method("PO");
    b.append_method("ST");
    b.append_target("/a/");
    b.append_target("b?x");
    b.append_target("=1");
    b.begin_header();
    b.append_header_name("Con");
    b.append_header_name("tent-Type");
    b.append_header_value("text/");
    b.append_header_value("plain");
    b.finish_header();
    b.begin_header();
    b.append_header_name("X");
    b.finish_header(); // an empty value
    b.append_body("bo");
    b.append_body("dy");
    b.set_version({1, 0});
    b.set_keep_alive(false);
    b.set_remote_address("127.0.0.1:5000");
    b.finish_target();

    EXPECT_EQ(r.method(), "POST");
    EXPECT_EQ(r.target(), "/a/b?x=1");
    EXPECT_EQ(r.path(), "/a/b");
    EXPECT_EQ(r.query(), "x=1");
    ASSERT_EQ(r.header_count(), 2u);
    EXPECT_EQ(r.header("content-type"), "text/plain");
    EXPECT_EQ(r.header("x"), "");
    EXPECT_EQ(r.body(), "body");
    EXPECT_EQ(r.version(), (http_version{1, 0}));
    EXPECT_FALSE(r.keep_alive());
    EXPECT_EQ(r.remote_address(), "127.0.0.1:5000");
    EXPECT_EQ(b.target_size(), 8u);
    EXPECT_EQ(b.arena_size(), std::string_view{"POST/a/b?x=1Content-Typetext/plainX"}.size());
}

TEST(RequestBuilder, TrimsOnlyTrailingSpacesAndTabs) {
    const request r = make("GET", {"/"}, {{"A", "v \t "}, {"B", "x y"}, {"C", " \t"}, {"D", "v\x0b"}});
    EXPECT_EQ(r.header("A"), "v");
    EXPECT_EQ(r.header("B"), "x y");
    EXPECT_EQ(r.header("C"), "");
    EXPECT_EQ(r.header("D"), "v\x0b");
}

TEST(RequestBuilder, PathEndsAtTheFirstQuestionMark) {
    EXPECT_EQ(make("GET", {"/p"}).path(), "/p");
    EXPECT_EQ(make("GET", {"/p"}).query(), "");
    EXPECT_EQ(make("GET", {"/p?"}).path(), "/p");
    EXPECT_EQ(make("GET", {"/p?"}).query(), "");
    EXPECT_EQ(make("GET", {"/p?a?b"}).path(), "/p");
    EXPECT_EQ(make("GET", {"/p?a?b"}).query(), "a?b");
    EXPECT_EQ(make("OPTIONS", {"*"}).path(), "*");
}

TEST(Request, HeaderLookupIsCaseInsensitiveAndReturnsTheFirst) {
    const request r = make("GET", {"/"}, {{"Accept", "a"}, {"ACCEPT", "b"}, {"X-Y", "c"}});
    EXPECT_EQ(r.header("accept"), "a");
    EXPECT_EQ(r.header("x-y"), "c");
    EXPECT_FALSE(r.header("x-"));
    EXPECT_FALSE(r.header("missing"));
}

TEST(Request, IteratesHeadersInOrder) {
    const request r = make("GET", {"/"}, {{"A", "1"}, {"B", "2"}, {"A", "3"}});
    std::vector<std::string> seen;
    for (const auto h : r.headers()) {
        seen.push_back(std::string(h.name) + "=" + std::string(h.value));
    }
    EXPECT_EQ(seen, (std::vector<std::string>{"A=1", "B=2", "A=3"}));
}

TEST(Request, QueryParamDecodesTheFirstMatch) {
    const request r = make("GET", {"/s?q=hello+world&q=second&pct=%41%2b%2F&empty=&flag&eq=a=b&&last=1"});
    EXPECT_EQ(r.query_param("q"), "hello world");
    EXPECT_EQ(r.query_param("pct"), "A+/");
    EXPECT_EQ(r.query_param("empty"), "");
    EXPECT_EQ(r.query_param("flag"), "");
    EXPECT_EQ(r.query_param("eq"), "a=b");
    EXPECT_EQ(r.query_param("last"), "1");
    EXPECT_FALSE(r.query_param("missing"));
    EXPECT_FALSE(r.query_param("Q")); // names are case-sensitive
    EXPECT_FALSE(r.query_param("la"));
}

TEST(Request, QueryParamMatchesDecodedNames) {
    const request r = make("GET", {"/?a%5Bb%5D=1&first+name=Ada"});
    EXPECT_EQ(r.query_param("a[b]"), "1");
    EXPECT_EQ(r.query_param("first name"), "Ada");
}

TEST(Request, QueryParamIsNulloptWhenMalformedOrAbsent) {
    EXPECT_FALSE(make("GET", {"/?a=%zz"}).query_param("a"));
    EXPECT_FALSE(make("GET", {"/?a=%4"}).query_param("a"));
    EXPECT_FALSE(make("GET", {"/"}).query_param("a"));
    EXPECT_FALSE(make("GET", {"/?"}).query_param(""));
}

TEST(Request, PathParamsAreDecodedAndLookedUpByName) {
    request r = make("GET", {"/users/J%C3%B6rg/files/a%2Fb"});
    request_builder b{r};
    const std::vector<param> params = {{"user", "J%C3%B6rg"}, {"file", "a%2Fb"}, {"plus", "a+b"}};
    ASSERT_TRUE(b.set_path_params(params));
    EXPECT_EQ(r.path_param("user"), "J\xC3\xB6rg");
    EXPECT_EQ(r.path_param("file"), "a/b");
    EXPECT_EQ(r.path_param("plus"), "a+b"); // '+' is a space only in queries
    EXPECT_FALSE(r.path_param("missing"));

    const std::vector<param> bad = {{"x", "%G0"}};
    EXPECT_FALSE(b.set_path_params(bad));
}

TEST(Request, ClearEmptiesEverything) {
    request r = make("POST", {"/a?b=c"}, {{"H", "v"}});
    request_builder b{r};
    b.append_body("body");
    b.set_version({1, 0});
    b.set_keep_alive(false);
    b.set_remote_address("[::1]:80");
    const std::vector<param> params = {{"p", "v"}};
    ASSERT_TRUE(b.set_path_params(params));

    r.clear();
    EXPECT_EQ(r.method(), "");
    EXPECT_EQ(r.target(), "");
    EXPECT_EQ(r.path(), "");
    EXPECT_EQ(r.query(), "");
    EXPECT_EQ(r.header_count(), 0u);
    EXPECT_FALSE(r.header("H"));
    EXPECT_FALSE(r.path_param("p"));
    EXPECT_EQ(r.body(), "");
    EXPECT_EQ(r.version(), (http_version{1, 1}));
    EXPECT_TRUE(r.keep_alive());
    EXPECT_EQ(r.remote_address(), "");
    EXPECT_EQ(b.arena_size(), 0u);

    // Refilled after clear(), nothing of the previous request shows through.
    b.append_method("GET");
    b.append_target("/x");
    b.finish_target();
    EXPECT_EQ(r.method(), "GET");
    EXPECT_EQ(r.path(), "/x");
}

TEST(Iequals, ComparesAsciiCaseInsensitively) {
    EXPECT_TRUE(iequals("Content-Length", "content-length"));
    EXPECT_TRUE(iequals("", ""));
    EXPECT_TRUE(iequals("A1-_", "a1-_"));
    EXPECT_FALSE(iequals("Host", "Hosts"));
    EXPECT_FALSE(iequals("Host", "Hest"));
    // Only letters fold: '[' and '{' differ by the case bit but are not letters.
    EXPECT_FALSE(iequals("[", "{"));
    EXPECT_FALSE(iequals("@", "`"));
    EXPECT_FALSE(iequals("\xC3\x84", "\xC3\xA4")); // no Unicode folding
}

TEST(PercentDecode, DecodesEscapes) {
    EXPECT_EQ(percent_decode("%41%4a%4A"), "AJJ");
    EXPECT_EQ(percent_decode("caf%C3%A9"), "caf\xC3\xA9");
    EXPECT_EQ(percent_decode("%00"), std::string(1, '\0'));
    EXPECT_EQ(percent_decode("plain"), "plain");
    EXPECT_EQ(percent_decode(""), "");
    EXPECT_EQ(percent_decode("%2525"), "%25"); // decoded once only
}

TEST(PercentDecode, PlusIsASpaceOnlyWhenAsked) {
    EXPECT_EQ(percent_decode("a+b"), "a+b");
    EXPECT_EQ(percent_decode("a+b", plus_decoding::as_space), "a b");
    EXPECT_EQ(percent_decode("a%2Bb", plus_decoding::as_space), "a+b");
}

TEST(PercentDecode, RejectsMalformedEscapes) {
    for (const char* bad : {"%", "%4", "a%", "%zz", "%g1", "%1g", "100%", "%%41"}) {
        EXPECT_FALSE(percent_decode(bad)) << bad;
    }
}

} // namespace
} // namespace sluice
