#pragma once
// Small text helpers shared by every boundary that reports errors.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servelab {

// Levenshtein edit distance.
int EditDistance(std::string_view a, std::string_view b);
// The closest candidate when it is plausibly a typo of `word`, else "".
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);
// " (did you mean 'x'?)" or "".
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);
std::string Join(const std::vector<std::string>& items, std::string_view separator);
// A double as YAML reads it back exactly: the shortest round-trip form, with ".0" added
// when that would read as an integer ("10.0", "0.75", "1e-05").
std::string FormatDouble(double value);
// Unable to find policy 'foo'. Valid values are: a, b, c.
std::string UnknownNameMessage(std::string_view kind, std::string_view name,
                               const std::vector<std::string>& valid);

// "1,234,567": large counts are read more easily with separators.
std::string WithCommas(int64_t value);

// `text` safe to print on a terminal: control bytes (NUL, ESC, CR, ...; all but newline
// and tab; the C1 controls U+0080..U+009F too) and bytes that are not well-formed UTF-8
// become \xNN, so a message quoting a user's bytes is never cut short, turned into
// terminal commands, or made invalid text in a UTF-8 log.
std::string Printable(std::string_view text);

}  // namespace servelab
