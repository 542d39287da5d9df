// Numbers as reports, tables and records print them: one formatting for every markdown table and JSON record; and
// error messages made safe to print on one terminal line.
// Thread rules: pure functions.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace rkv {

/// `v` with `significant` significant digits (std::setprecision, e.g. fmt(0.012345, 3) = "0.0123"); "nan" for NaN.
std::string fmt(double v, int significant = 4);

/// `v` with `decimals` digits after the point (std::fixed, e.g. fixed_decimals(0.5, 3) = "0.500"); "nan" for NaN.
std::string fixed_decimals(double v, int decimals);

/// `v` as JSON: the number, or null when it is NaN or infinite (JSON has neither).
nlohmann::json num(double v);

/// `message` as one printable line, whatever the user text it echoes holds: every control byte (below 0x20, and
/// 0x7f) becomes "\xNN" (two hex digits, so a newline is "\x0a" and an ESC cannot drive the terminal), and every run
/// of more than `max_run` bytes without a space is cut to its first max_run / 2 and last max_run / 4 bytes around
/// "...[N bytes]..." (N: the bytes left out), the cuts moved off UTF-8 continuation bytes so no character is split.
/// Bytes 0x80 and above are otherwise kept (UTF-8 text stays readable).
std::string printable_message(const std::string& message, size_t max_run = 256);

/// `text` safe inside one cell of a markdown table: "|" becomes "\|" and every control byte (a newline included)
/// "\xNN", so a name or label cannot add columns or rows; other bytes are kept.
std::string markdown_cell(const std::string& text);

/// Natural order for messages that name numbers ("layer 2" before "layer 10"): runs of ASCII digits compare by their
/// value (leading zeros ignored, then the shorter run first), everything else byte by byte. A strict weak order.
struct NaturalLess {
  bool operator()(const std::string& a, const std::string& b) const;
};

}  // namespace rkv
