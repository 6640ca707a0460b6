#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "certctl/kube/client.h"
#include "certctl/util/result.h"

namespace certctl::kube {

// Turns a watch body, delivered in arbitrary pieces, into events: one JSON object per line
// ({"type": "...", "object": {...}}). Feed may be called with any split of the stream.
class WatchDecoder {
 public:
  // Decodes every complete line in `chunk` (plus what was buffered) into `out`. A line that
  // is not a valid event is an error; the decoder should then be discarded.
  Status Feed(std::string_view chunk, std::vector<WatchEvent>& out);

  // Bytes of an incomplete line still buffered.
  std::size_t pending() const { return buffer_.size(); }

 private:
  std::string buffer_;
};

}  // namespace certctl::kube
