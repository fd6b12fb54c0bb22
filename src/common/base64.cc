#include "common/base64.h"

#include <cstdint>

namespace magnetar::common {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string encode_base64(std::string_view bytes, bool url) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto at = [&](size_t k) { return static_cast<uint8_t>(bytes[k]); };
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = (at(i) << 16) | (at(i + 1) << 8) | at(i + 2);
    for (int shift = 18; shift >= 0; shift -= 6) out.push_back(kAlphabet[(v >> shift) & 63]);
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = at(i) << 16;
    if (rest == 2) v |= at(i + 1) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    if (rest == 2) out.push_back(kAlphabet[(v >> 6) & 63]);
    if (!url) out.append(rest == 1 ? "==" : "=");
  }
  if (url) {
    for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  }
  return out;
}

}  // namespace

std::string base64url_encode(std::string_view bytes) { return encode_base64(bytes, true); }
std::string base64_encode(std::string_view bytes) { return encode_base64(bytes, false); }

Result<std::string> base64_decode(std::string_view text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  bool padding = false;
  for (char c : text) {
    int v;
    if (c == '=') {
      padding = true;
      continue;
    }
    if (c == '\n' || c == '\r') continue;
    if (padding) return Status::invalid_argument("not base64: data after padding");
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+' || c == '-') v = 62;
    else if (c == '/' || c == '_') v = 63;
    else return Status::invalid_argument("not base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  // Canonical only: bits left over after the last whole byte must be
  // zero, so one byte string has one encoding (a token cannot be varied
  // without changing its signature bytes).
  if (bits == 6) return Status::invalid_argument("not base64: a lone character at the end");
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return Status::invalid_argument("not canonical base64");
  return out;
}

}  // namespace magnetar::common
