// exchange_errc as std::error_code, and startup_error's key.

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <system_error>

#include <sluice/error.h>

namespace sluice {
namespace {

TEST(error, exchange_codes_have_distinct_messages) {
    std::set<std::string> messages;
    for (const exchange_errc e :
         {exchange_errc::client_disconnected, exchange_errc::write_failed, exchange_errc::timed_out,
          exchange_errc::shutting_down, exchange_errc::handler_threw}) {
        const std::error_code ec = e;
        EXPECT_EQ(&ec.category(), &exchange_category());
        EXPECT_TRUE(static_cast<bool>(ec));
        EXPECT_FALSE(ec.message().empty());
        messages.insert(ec.message());
    }
    EXPECT_EQ(messages.size(), 5U);
    EXPECT_EQ(std::error_code(exchange_errc::timed_out).message(), "async timeout expired");
    EXPECT_EQ(std::string(exchange_category().name()), "sluice.exchange");
}

TEST(error, codes_compare_with_the_enum) {
    const std::error_code ec = make_error_code(exchange_errc::client_disconnected);
    EXPECT_EQ(ec, exchange_errc::client_disconnected);
    EXPECT_NE(ec, exchange_errc::write_failed);
    EXPECT_NE(ec, std::make_error_code(std::errc::connection_reset)); // another category
    EXPECT_EQ(std::error_code(77, exchange_category()).message(), "unknown exchange error 77");
}

TEST(error, startup_error_formats_key_and_message) {
    const startup_error named("listen", "bad port");
    EXPECT_EQ(named.key(), "listen");
    EXPECT_STREQ(named.what(), "listen: bad port");
    const startup_error anonymous("", "no single key");
    EXPECT_EQ(anonymous.key(), "");
    EXPECT_STREQ(anonymous.what(), "no single key");
}

} // namespace
} // namespace sluice
