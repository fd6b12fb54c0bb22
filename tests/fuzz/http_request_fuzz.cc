// libFuzzer target for the HTTP request decoder. The input is split into two
// reads at a point taken from its first byte, as a socket might deliver it.
// Build: cmake -S . -B build-fuzz -DMAGNETAR_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
// Run:   build-fuzz/tests/fuzz/http_request_fuzz -max_total_time=60 <copy of tests/fuzz/corpus/http>
#include <cstddef>
#include <cstdint>

#include "admin/http_request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using magnetar::admin::HttpRequestParser;
  magnetar::admin::HttpLimits limits;
  limits.max_body_bytes = 1 << 16;
  HttpRequestParser parser(limits);
  magnetar::common::SliceChain input;
  size_t split = size > 0 ? data[0] % (size + 1) : 0;
  for (int part = 0; part < 2; ++part) {
    const uint8_t* p = part == 0 ? data : data + split;
    size_t n = part == 0 ? split : size - split;
    input.append(magnetar::common::Slice::copy_of(p, n));
    for (;;) {
      auto r = parser.parse(input);
      if (r != HttpRequestParser::Result::kRequest) break;
      auto req = parser.take_request();
      if (req->body.size() > limits.max_body_bytes) __builtin_trap();
    }
  }
  return 0;
}
