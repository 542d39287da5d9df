#include "core/format.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

namespace rkv {

std::string fmt(double v, int significant) {
  if (std::isnan(v)) return "nan";
  std::ostringstream os;
  os << std::setprecision(significant) << v;
  return os.str();
}

std::string fixed_decimals(double v, int decimals) {
  if (std::isnan(v)) return "nan";
  std::ostringstream os;
  os << std::fixed << std::setprecision(decimals) << v;
  return os.str();
}

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

/// One run without spaces, shortened when it is longer than max_run bytes.
std::string shortened(const std::string& run, size_t max_run) {
  if (run.size() <= max_run) return run;
  size_t head = max_run / 2, tail_start = run.size() - max_run / 4;
  while (head > 0 && is_continuation(static_cast<unsigned char>(run[head]))) --head;
  while (tail_start < run.size() && is_continuation(static_cast<unsigned char>(run[tail_start]))) ++tail_start;
  return run.substr(0, head) + "...[" + std::to_string(tail_start - head) + " bytes]..." + run.substr(tail_start);
}

}  // namespace

std::string printable_message(const std::string& message, size_t max_run) {
  std::string escaped;
  escaped.reserve(message.size());
  static const char* kHex = "0123456789abcdef";
  for (unsigned char c : message) {
    if (c < 0x20 || c == 0x7f) {
      escaped += "\\x";
      escaped += kHex[c >> 4];
      escaped += kHex[c & 15];
    } else {
      escaped += static_cast<char>(c);
    }
  }
  std::string out, run;
  for (char c : escaped) {
    if (c == ' ') {
      out += shortened(run, max_run) + ' ';
      run.clear();
    } else {
      run += c;
    }
  }
  return out + shortened(run, max_run);
}

std::string markdown_cell(const std::string& text) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool NaturalLess::operator()(const std::string& a, const std::string& b) const {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      size_t is = i, js = j;  // skip leading zeros, then the longer number is larger
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      if (ie - is != je - js) return ie - is < je - js;
      const int c = a.compare(is, ie - is, b, js, je - js);
      if (c != 0) return c < 0;
      if (ie - i != je - j) return ie - i < je - j;  // equal values: fewer leading zeros first
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

}  // namespace rkv
