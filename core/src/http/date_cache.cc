// The Date header's text, formatted once per second (RFC 9110 §6.6.1 wants Date on nearly
// every response; formatting it per response would be wasted work).
#include <time.h>

#include <chrono>
#include <cstdint>
#include <string_view>

#include "http/server_session.h"

namespace sluice::http {

namespace {

void put2(char* p, int v) noexcept {
    p[0] = static_cast<char>('0' + v / 10 % 10);
    p[1] = static_cast<char>('0' + v % 10);
}

} // namespace

std::string_view date_cache::get(std::chrono::system_clock::time_point now) noexcept {
    const std::int64_t second = std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count();
    if (second == second_ && len_ != 0) {
        return {text_, len_};
    }
    // IMF-fixdate (RFC 9110 §5.6.7): "Sun, 06 Nov 1994 08:49:37 GMT". The names are fixed
    // English, whatever the locale, so no strftime.
    static constexpr char days[] = "SunMonTueWedThuFriSat";
    static constexpr char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    const auto t = static_cast<time_t>(second);
    tm parts{};
    if (gmtime_r(&t, &parts) == nullptr) {
        return {text_, len_}; // out of range for the platform: keep the last good value
    }
    char* p = text_;
    const auto day = static_cast<std::size_t>(parts.tm_wday) * 3;
    const auto month = static_cast<std::size_t>(parts.tm_mon) * 3;
    p[0] = days[day];
    p[1] = days[day + 1];
    p[2] = days[day + 2];
    p[3] = ',';
    p[4] = ' ';
    put2(p + 5, parts.tm_mday);
    p[7] = ' ';
    p[8] = months[month];
    p[9] = months[month + 1];
    p[10] = months[month + 2];
    p[11] = ' ';
    // year = 4DIGIT: years past 9999 are not representable, so they are clamped.
    int year = parts.tm_year + 1900;
    year = year < 0 ? 0 : (year > 9999 ? 9999 : year);
    put2(p + 12, year / 100);
    put2(p + 14, year % 100);
    p[16] = ' ';
    put2(p + 17, parts.tm_hour);
    p[19] = ':';
    put2(p + 20, parts.tm_min);
    p[22] = ':';
    put2(p + 23, parts.tm_sec);
    p[25] = ' ';
    p[26] = 'G';
    p[27] = 'M';
    p[28] = 'T';
    len_ = 29;
    second_ = second;
    return {text_, len_};
}

} // namespace sluice::http
