// libFuzzer target for the Pulsar frame decoder and batch reader. The input is
// a byte stream from a client, split into two reads at a point taken from its
// first byte; the second byte picks a small or the default frame limit and
// whether checksums are checked. Every frame decoded must survive encode and
// decode again unchanged.
// Build: cmake -S . -B build-fuzz -DMAGNETAR_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
// Run:   build-fuzz/tests/fuzz/pulsar_frame_fuzz -max_total_time=60 tests/fuzz/corpus/pulsar
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/frame.h"

namespace {

using magnetar::common::Slice;
using magnetar::common::SliceChain;
using namespace magnetar::protocol::pulsar;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// Re-encodes a decoded frame and decodes it again: the command, metadata and
// the stored entry must come back the same.
void check_round_trip(const Frame& f, const FrameLimits& limits) {
  FrameLimits roomy = limits;
  roomy.max_frame_size = size_t{1} << 30;
  Frame again;
  magnetar::common::Status why;
  if (!f.has_payload) {
    check(decode_frame(encode_command(f.command), roomy, &again, &why) == DecodeResult::kFrame);
    check(again.command.SerializeAsString() == f.command.SerializeAsString());
    return;
  }
  const auto* bem = f.has_broker_entry_metadata ? &f.broker_entry_metadata : nullptr;
  SliceChain in;
  in.append(encode_payload_head(f.command, f.entry.size(), bem));
  in.append(f.entry);
  check(FrameDecoder(roomy).decode(in, &again) == DecodeResult::kFrame);
  check(in.empty());
  check(again.entry.view() == f.entry.view());
  check(again.payload.view() == f.payload.view());
  check(again.metadata.SerializeAsString() == f.metadata.SerializeAsString());
  check(again.has_broker_entry_metadata == f.has_broker_entry_metadata);
  // The payload is the tail of the entry, the entry the tail of the frame.
  check(f.payload.data() + f.payload.size() == f.entry.data() + f.entry.size());

  // Batches: every message lies inside the payload, in order.
  if (f.metadata.has_num_messages_in_batch() && f.metadata.compression() == proto::NONE) {
    BatchReader reader(f.payload, f.metadata.num_messages_in_batch());
    BatchMessage m;
    const uint8_t* last_end = f.payload.data();
    while (reader.next(&m)) {
      check(m.payload.data() >= last_end);
      check(m.payload.data() + m.payload.size() <= f.payload.data() + f.payload.size());
      check(static_cast<size_t>(m.metadata.payload_size()) == m.payload.size());
      last_end = m.payload.data() + m.payload.size();
    }
    check(reader.index() <= std::max(0, f.metadata.num_messages_in_batch()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  size_t split = data[0] % (size - 1);
  FrameLimits limits;
  if (data[1] & 1) limits.max_frame_size = 4096;
  // Without checksum checks mutations reach the metadata and batch parsers.
  if (data[1] & 2) limits.verify_checksum = false;
  data += 2;
  size -= 2;
  FrameDecoder decoder(limits);
  SliceChain input;
  Frame frame;
  for (int part = 0; part < 2; ++part) {
    const uint8_t* p = part == 0 ? data : data + split;
    size_t n = part == 0 ? split : size - split;
    input.append(Slice::copy_of(p, n));
    for (;;) {
      size_t before = input.size();
      DecodeResult r = decoder.decode(input, &frame);
      if (r == DecodeResult::kNeedMore || r == DecodeResult::kStreamError) {
        check(input.size() == before);
        check(r == DecodeResult::kNeedMore || !decoder.status().is_ok());
        break;
      }
      check(input.size() < before);  // a frame was consumed
      check(before - input.size() <= limits.max_frame_size);
      if (r == DecodeResult::kFrame) {
        check_round_trip(frame, limits);
      } else {
        check(!decoder.status().is_ok());
        if (r == DecodeResult::kChecksumMismatch) check(frame.payload.empty() && frame.entry.empty());
      }
    }
  }
  return 0;
}
