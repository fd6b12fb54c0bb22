// libFuzzer target for the Kafka request codec: the input is one request
// body after the size prefix (header, then the API's schema at the header's
// version), decoded as the listener does. A request that decodes must encode
// and decode again to the same bytes; a Produce's record sets go through the
// record batch parser and the conversion to a Pulsar entry and back.
// Build: cmake -S . -B build-fuzz -DMAGNETAR_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
// Run:   build-fuzz/tests/fuzz/kafka_request_fuzz -max_total_time=60 tests/fuzz/corpus/kafka
#include <cstddef>
#include <cstdint>

#include "protocol/kafka/convert.h"
#include "protocol/kafka/header.h"
#include "protocol/kafka/messages.h"
#include "protocol/kafka/record_batch.h"
#include "protocol/kafka/schema.h"

namespace {

using magnetar::common::Slice;
using namespace magnetar::protocol::kafka;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void exercise_records(const Slice& records) {
  auto batches = parse_record_set(records);
  if (!batches) return;
  for (const RecordBatch& b : *batches) {
    if (b.records.empty()) continue;
    ConvertedEntry e = batch_to_entry(b, 1, "fuzz", 0);
    WireWriter out;
    check(append_entry_as_batch(e.header, e.entry, out).is_ok());
    auto back = parse_record_set(out.finish());
    check(back.is_ok() && back->size() == 1 && back->front().records.size() == b.records.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Slice input = Slice::copy_of(data, size);
  WireReader in(input);
  RequestHeader header = peek_request_header(in);
  const ApiSpec* api = find_api(header.api_key);
  if (api == nullptr || !api->serves(header.api_version) || !in.ok()) return 0;
  const int16_t v = header.api_version;
  const bool flexible = api->flexible(v);
  read_request_header_rest(in, &header, api->request_header_version(v));
  Struct body = decode_struct(in, *api->request, v, flexible);
  if (!in.ok()) return 0;
  WireWriter out;
  encode_struct(out, body, v, flexible);
  Slice encoded = out.finish();
  WireReader again(encoded);
  Struct body2 = decode_struct(again, *api->request, v, flexible);
  check(again.ok() && again.remaining() == 0);
  WireWriter out2;
  encode_struct(out2, body2, v, flexible);
  check(out2.finish().view() == encoded.view());
  if (header.api_key == kProduce) {
    for (const auto& t : body.array("Topics")) {
      for (const auto& p : t.array("Partitions")) {
        if (const Slice* records = p.bytes("Records")) exercise_records(*records);
      }
    }
  }
  return 0;
}
