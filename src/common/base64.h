// Base64 (RFC 4648): standard with padding, and base64url without it (what
// JWTs use). Decoding accepts either alphabet, with or without padding.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace magnetar::common {

std::string base64_encode(std::string_view bytes);
std::string base64url_encode(std::string_view bytes);
// kInvalidArgument for a character outside both alphabets, data after
// '=' padding, a lone last character, or non-zero bits after the last
// whole byte (a non-canonical encoding).
Result<std::string> base64_decode(std::string_view text);

}  // namespace magnetar::common
