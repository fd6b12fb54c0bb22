// libFuzzer target for the AMQP 0-9-1 codec: the input is a byte stream as a
// client sends it after the protocol header. Frames are cut as the listener
// does; a method that decodes must encode to the bytes it came from, and a
// content header's properties must encode back to their raw bytes.
// Build: cmake -S . -B build-fuzz -DMAGNETAR_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
// Run:   build-fuzz/tests/fuzz/amqp_frame_fuzz -max_total_time=60 tests/fuzz/corpus/amqp
#include <cstddef>
#include <cstdint>

#include "protocol/amqp/frame.h"
#include "protocol/amqp/methods.h"
#include "protocol/amqp/properties.h"

namespace {

using magnetar::common::Slice;
using namespace magnetar::protocol::amqp;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  magnetar::common::SliceChain input;
  // Two pieces, so frames that span reads are exercised too.
  size_t half = size / 2;
  input.append(Slice::copy_of(data, half));
  input.append(Slice::copy_of(data + half, size - half));
  Frame frame;
  while (decode_frame(input, kMinFrameMax * 4, &frame) == DecodeResult::kFrame) {
    if (frame.type == FrameType::kMethod) {
      auto method = decode_method(frame.payload);
      if (!method) continue;
      WireWriter out;
      encode_method(out, *method);
      Slice encoded = out.finish();
      auto again = decode_method(encoded);
      check(again.is_ok() && again->args == method->args);
      // Bits that a peer left set past the last one are dropped; otherwise
      // the encoding is the input's.
      check(encoded.size() == frame.payload.size());
    } else if (frame.type == FrameType::kHeader) {
      auto header = decode_content_header(frame.payload);
      if (!header) continue;
      WireWriter out;
      encode_properties(out, header->properties);
      auto back = decode_properties(out.finish());
      check(back.is_ok() && *back == header->properties);
    }
  }
  return 0;
}
