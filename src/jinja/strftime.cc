#include "jinja/strftime.h"

#include <cstdio>
#include <optional>

namespace kvault::jinja {
namespace {

constexpr const char* kDays[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                 "Thursday", "Friday", "Saturday"};
constexpr const char* kMonths[] = {
    "January", "February", "March",     "April",   "May",      "June",
    "July",    "August",   "September", "October", "November", "December"};

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
// days_from_civil).
long DaysFromCivil(int y, int m, int d) {
  y -= m <= 2;
  const long era = (y >= 0 ? y : y - 399) / 400;
  const long yoe = y - era * 400;
  const long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

std::string Num(long v, int width, bool pad, char fill = '0') {
  char buf[32];
  if (!pad) {
    std::snprintf(buf, sizeof(buf), "%ld", v);
  } else if (fill == ' ') {
    std::snprintf(buf, sizeof(buf), "%*ld", width, v);
  } else {
    std::snprintf(buf, sizeof(buf), "%0*ld", width, v);
  }
  return buf;
}

// The broken-down fields one directive reads.
struct Fields {
  int year, month, day, hour, minute, second, wday, yday;
};

// Returns the expansion of directive `c` (nullopt when unknown).
std::optional<std::string> Directive(char c, const Fields& f, bool pad,
                                     const std::tm& tm) {
  const int hour12 = f.hour % 12 == 0 ? 12 : f.hour % 12;
  switch (c) {
    case 'a':
      return std::string(kDays[f.wday]).substr(0, 3);
    case 'A':
      return std::string(kDays[f.wday]);
    case 'b':
    case 'h':
      return std::string(kMonths[f.month]).substr(0, 3);
    case 'B':
      return std::string(kMonths[f.month]);
    case 'd':
      return Num(f.day, 2, pad);
    case 'e':
      return Num(f.day, 2, pad, ' ');
    case 'f':
      return std::string("000000");
    case 'H':
      return Num(f.hour, 2, pad);
    case 'I':
      return Num(hour12, 2, pad);
    case 'j':
      return Num(f.yday + 1, 3, pad);
    case 'm':
      return Num(f.month + 1, 2, pad);
    case 'M':
      return Num(f.minute, 2, pad);
    case 'p':
      return std::string(f.hour < 12 ? "AM" : "PM");
    case 'S':
      return Num(f.second, 2, pad);
    case 'u':
      return Num(f.wday == 0 ? 7 : f.wday, 1, pad);
    case 'w':
      return Num(f.wday, 1, pad);
    case 'y':
      return Num(((f.year % 100) + 100) % 100, 2, pad);
    case 'Y':
      return Num(f.year, 1, false);
    case 'z':
    case 'Z':
      return std::string();
    case '%':
      return std::string("%");
    case 'c':
      return Strftime("%a %b %e %H:%M:%S %Y", tm);
    case 'x':
    case 'D':
      return Strftime("%m/%d/%y", tm);
    case 'X':
    case 'T':
      return Strftime("%H:%M:%S", tm);
    case 'F':
      return Strftime("%Y-%m-%d", tm);
    case 'R':
      return Strftime("%H:%M", tm);
    default:
      return std::nullopt;
  }
}

}  // namespace

std::string Strftime(std::string_view format, const std::tm& tm) {
  Fields f;
  f.year = tm.tm_year + 1900;
  f.month = (tm.tm_mon % 12 + 12) % 12;
  f.day = tm.tm_mday;
  f.hour = tm.tm_hour;
  f.minute = tm.tm_min;
  f.second = tm.tm_sec;
  const long days = DaysFromCivil(f.year, f.month + 1, f.day);
  f.wday = static_cast<int>(((days % 7) + 11) % 7);  // 0 = Sunday
  f.yday = static_cast<int>(days - DaysFromCivil(f.year, 1, 1));
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out.push_back(format[i]);
      continue;
    }
    // glibc's '-' flag: no padding (%-d).
    size_t j = i + 1;
    const bool pad = !(format[j] == '-' && j + 1 < format.size());
    if (!pad) ++j;
    const std::optional<std::string> piece = Directive(format[j], f, pad, tm);
    out += piece ? *piece : std::string(format.substr(i, j - i + 1));
    i = j;
  }
  return out;
}

bool ParseIsoDateTime(std::string_view text, std::tm* tm) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char sep = 0;
  const std::string str(text);
  const int n = std::sscanf(str.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d", &y, &mo,
                            &d, &sep, &h, &mi, &s);
  if (n < 3 || (n > 3 && n < 6) || (n > 3 && sep != 'T' && sep != ' ')) {
    return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 ||
      mi > 59 || s < 0 || s > 60) {
    return false;
  }
  *tm = std::tm{};
  tm->tm_year = y - 1900;
  tm->tm_mon = mo - 1;
  tm->tm_mday = d;
  tm->tm_hour = h;
  tm->tm_min = mi;
  tm->tm_sec = s;
  const long days = DaysFromCivil(y, mo, d);
  tm->tm_wday = static_cast<int>(((days % 7) + 11) % 7);
  tm->tm_yday = static_cast<int>(days - DaysFromCivil(y, 1, 1));
  return true;
}

}  // namespace kvault::jinja
