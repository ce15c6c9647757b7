#include "jinja/strftime.h"

#include <cstdio>

namespace kvault::jinja {
namespace {

constexpr const char* kDays[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                 "Thursday", "Friday", "Saturday"};
constexpr const char* kMonths[] = {"January", "February", "March",
                                   "April",   "May",      "June",
                                   "July",    "August",   "September",
                                   "October", "November", "December"};

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

}  // namespace

std::string Strftime(std::string_view format, const std::tm& tm) {
  const int year = tm.tm_year + 1900;
  const int month = (tm.tm_mon % 12 + 12) % 12;
  const int day = tm.tm_mday;
  const long days = DaysFromCivil(year, month + 1, day);
  const int wday = static_cast<int>(((days % 7) + 11) % 7);  // 0 = Sunday
  const int yday = static_cast<int>(days - DaysFromCivil(year, 1, 1));
  const int hour12 = tm.tm_hour % 12 == 0 ? 12 : tm.tm_hour % 12;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out.push_back(format[i]);
      continue;
    }
    bool pad = true;
    size_t j = i + 1;
    if (format[j] == '-' && j + 1 < format.size()) {
      pad = false;
      ++j;
    }
    const char c = format[j];
    std::string piece;
    switch (c) {
      case 'a': piece = std::string(kDays[wday]).substr(0, 3); break;
      case 'A': piece = kDays[wday]; break;
      case 'b': case 'h': piece = std::string(kMonths[month]).substr(0, 3);
        break;
      case 'B': piece = kMonths[month]; break;
      case 'd': piece = Num(day, 2, pad); break;
      case 'e': piece = Num(day, 2, pad, ' '); break;
      case 'f': piece = "000000"; break;
      case 'H': piece = Num(tm.tm_hour, 2, pad); break;
      case 'I': piece = Num(hour12, 2, pad); break;
      case 'j': piece = Num(yday + 1, 3, pad); break;
      case 'm': piece = Num(month + 1, 2, pad); break;
      case 'M': piece = Num(tm.tm_min, 2, pad); break;
      case 'p': piece = tm.tm_hour < 12 ? "AM" : "PM"; break;
      case 'S': piece = Num(tm.tm_sec, 2, pad); break;
      case 'u': piece = Num(wday == 0 ? 7 : wday, 1, pad); break;
      case 'w': piece = Num(wday, 1, pad); break;
      case 'y': piece = Num(((year % 100) + 100) % 100, 2, pad); break;
      case 'Y': piece = Num(year, 1, false); break;
      case 'z': case 'Z': break;
      case '%': piece = "%"; break;
      case 'c':
        piece = Strftime("%a %b %e %H:%M:%S %Y", tm);
        break;
      case 'x': piece = Strftime("%m/%d/%y", tm); break;
      case 'X': piece = Strftime("%H:%M:%S", tm); break;
      case 'D': piece = Strftime("%m/%d/%y", tm); break;
      case 'F': piece = Strftime("%Y-%m-%d", tm); break;
      case 'T': piece = Strftime("%H:%M:%S", tm); break;
      case 'R': piece = Strftime("%H:%M", tm); break;
      default:
        piece = std::string(format.substr(i, j - i + 1));
    }
    out += piece;
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
