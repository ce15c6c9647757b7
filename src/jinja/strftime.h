// Python's datetime.strftime in the C locale, for strftime_now.
#ifndef KVAULT_JINJA_STRFTIME_H_
#define KVAULT_JINJA_STRFTIME_H_

#include <ctime>
#include <string>
#include <string_view>

namespace kvault::jinja {

// Formats `tm` (its year, month, day, hour, minute and second; weekday and
// day of year are recomputed) with the C-locale directives %a %A %b %B %c
// %d %e %f %H %I %j %m %M %p %S %u %w %x %X %y %Y %z %Z %% and glibc's '-'
// flag (%-d: no padding). Unknown directives are kept as written.
std::string Strftime(std::string_view format, const std::tm& tm);

// Parses "YYYY-MM-DDTHH:MM:SS" (a space may replace the T; seconds are
// optional) into `tm`; false when malformed.
bool ParseIsoDateTime(std::string_view text, std::tm* tm);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_STRFTIME_H_
