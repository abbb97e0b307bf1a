// sluice::result<T>: what a co_await of an async_op<T> gives back.
#include <gtest/gtest.h>

#include <string>
#include <system_error>

#include <sluice/result.h>

namespace sluice {
namespace {

TEST(result, value) {
    result<std::string> r(std::string("v"));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r.has_value());
    EXPECT_FALSE(r.error());
    EXPECT_EQ(*r, "v");
    EXPECT_EQ(r->size(), 1u);
    EXPECT_EQ(r.value(), "v");
    EXPECT_EQ(std::move(r).value(), "v");
}

TEST(result, error) {
    result<int> r(std::make_error_code(std::errc::operation_canceled));
    EXPECT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::operation_canceled);
    EXPECT_THROW((void)r.value(), std::system_error);
}

TEST(result, an_empty_error_code_is_still_an_error) {
    // Never "no value and no error": a caller that checks error() alone must see the failure.
    result<int> r{std::error_code{}};
    EXPECT_FALSE(r);
    EXPECT_TRUE(r.error());
}

} // namespace
} // namespace sluice
