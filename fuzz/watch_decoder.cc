// The incremental watch decoder: the body of a watch, as the API server streams it, cut into
// pieces wherever the network cuts it. The first byte of the input seeds the cuts; the rest is
// the stream. Properties:
//  - Feed never throws, whatever the bytes;
//  - the cut does not matter: the stream fed in pieces gives the same events, the same
//    outcome and the same pending bytes as the stream fed at once (up to the first bad line,
//    after which the decoder is discarded);
//  - every event holds an object, and an event written back as a line decodes to itself.

#include "certctl/kube/watch_decoder.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"

namespace {

using certctl::kube::Json;
using certctl::kube::WatchDecoder;
using certctl::kube::WatchEvent;
using certctl::kube::WatchEventType;

struct Outcome {
  bool ok = true;
  std::vector<WatchEvent> events;
  std::size_t pending = 0;
};

Outcome FeedWhole(std::string_view stream) {
  Outcome outcome;
  WatchDecoder decoder;
  outcome.ok = decoder.Feed(stream, outcome.events).has_value();
  outcome.pending = decoder.pending();
  return outcome;
}

// Piece sizes from a small xorshift generator: seed 0 feeds byte by byte, seed 255 all at
// once, anything else pieces of 0 to 64 bytes (empty pieces included, as a transport may
// deliver them).
Outcome FeedInPieces(std::string_view stream, std::uint8_t seed) {
  Outcome outcome;
  WatchDecoder decoder;
  std::uint32_t state = 0x9e3779b9u ^ (static_cast<std::uint32_t>(seed) * 0x01000193u);
  std::size_t at = 0;
  do {
    std::size_t piece = stream.size() - at;
    if (seed == 0) {
      piece = std::min<std::size_t>(piece, 1);
    } else if (seed != 255) {
      state ^= state << 13;
      state ^= state >> 17;
      state ^= state << 5;
      piece = std::min<std::size_t>(piece, state % 65);
    }
    if (!decoder.Feed(stream.substr(at, piece), outcome.events)) {
      outcome.ok = false;
      return outcome;
    }
    at += piece;
  } while (at < stream.size());
  outcome.pending = decoder.pending();
  return outcome;
}

std::string_view TypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "";
}

bool SameEvent(const WatchEvent& a, const WatchEvent& b) {
  return a.type == b.type && a.object == b.object;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::uint8_t seed = data[0];
  const std::string_view stream = certctl::fuzz::AsText(data + 1, size - 1);

  const Outcome whole = FeedWhole(stream);
  const Outcome pieces = FeedInPieces(stream, seed);

  FUZZ_CHECK(whole.ok == pieces.ok);
  FUZZ_CHECK(whole.events.size() == pieces.events.size());
  for (std::size_t i = 0; i < whole.events.size(); ++i) {
    FUZZ_CHECK(SameEvent(whole.events[i], pieces.events[i]));
  }
  if (whole.ok) {
    // What follows the last line end stays buffered, and nothing else.
    const std::size_t newline = stream.rfind('\n');
    const std::size_t tail =
        newline == std::string_view::npos ? stream.size() : stream.size() - newline - 1;
    FUZZ_CHECK(whole.pending == tail);
    FUZZ_CHECK(pieces.pending == tail);
  }

  for (const WatchEvent& event : whole.events) {
    FUZZ_CHECK(event.object.is_object());
    // The decoder validated the text, so writing it back cannot fail.
    const std::string line =
        Json{{"type", TypeName(event.type)}, {"object", event.object}}.dump() + "\n";
    WatchDecoder decoder;
    std::vector<WatchEvent> again;
    FUZZ_CHECK(decoder.Feed(line, again).has_value());
    FUZZ_CHECK(again.size() == 1 && SameEvent(again[0], event));
    FUZZ_CHECK(decoder.pending() == 0);
  }
  return 0;
}
