#include "certctl/kube/watch_decoder.h"

#include <string>

#include "certctl/kube/transport.h"

namespace certctl::kube {
namespace {

// One event holds one object, which the API server keeps under 1.5 MiB: a longer line is a
// broken or hostile stream rather than a big Secret.
constexpr std::size_t kMaxLine = kMaxResponseBytes;

Result<WatchEventType> ParseType(std::string_view type) {
  if (type == "ADDED") {
    return WatchEventType::kAdded;
  }
  if (type == "MODIFIED") {
    return WatchEventType::kModified;
  }
  if (type == "DELETED") {
    return WatchEventType::kDeleted;
  }
  if (type == "BOOKMARK") {
    return WatchEventType::kBookmark;
  }
  if (type == "ERROR") {
    return WatchEventType::kError;
  }
  std::string shown(type.substr(0, 40));
  return Fail(ErrorCode::kBadResponse, "watch stream: unknown event type \"" + shown + "\"");
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// Messages never quote the line: events carry Secrets.
Status DecodeLine(std::string_view line, std::vector<WatchEvent>& out) {
  if (IsBlank(line)) {
    return {};
  }
  Json event;
  try {
    event = Json::parse(line);
  } catch (const Json::parse_error& e) {
    return Fail(ErrorCode::kBadResponse, "watch stream: malformed event: invalid JSON at byte " +
                                             std::to_string(e.byte) + " of a " +
                                             std::to_string(line.size()) + "-byte line");
  } catch (const Json::exception&) {
    // Well-formed text nlohmann still refuses: a number beyond a double ("1e999").
    return Fail(ErrorCode::kBadResponse,
                "watch stream: malformed event: number out of range in a " +
                    std::to_string(line.size()) + "-byte line");
  }
  if (!event.is_object()) {
    return Fail(ErrorCode::kBadResponse, "watch stream: malformed event: not a JSON object");
  }
  const auto type = event.find("type");
  if (type == event.end() || !type->is_string()) {
    return Fail(ErrorCode::kBadResponse, "watch stream: malformed event: no \"type\"");
  }
  auto parsed_type = ParseType(type->get_ref<const std::string&>());
  if (!parsed_type) {
    return Fail(parsed_type.error());
  }
  const auto object = event.find("object");
  if (object == event.end() || !object->is_object()) {
    return Fail(
        ErrorCode::kBadResponse,
        "watch stream: malformed " + type->get_ref<const std::string&>() + " event: no \"object\"");
  }
  out.push_back(WatchEvent{*parsed_type, std::move(*object)});
  return {};
}

}  // namespace

Status WatchDecoder::Feed(std::string_view chunk, std::vector<WatchEvent>& out) {
  std::size_t start = 0;
  while (true) {
    const std::size_t newline = chunk.find('\n', start);
    if (newline == std::string_view::npos) {
      break;
    }
    const std::string_view piece = chunk.substr(start, newline - start);
    start = newline + 1;
    Status decoded;
    if (buffer_.empty()) {
      decoded = DecodeLine(piece, out);
    } else {
      buffer_.append(piece);
      decoded = DecodeLine(buffer_, out);
      buffer_.clear();
    }
    if (!decoded) {
      return decoded;
    }
  }
  buffer_.append(chunk.substr(start));
  if (buffer_.size() > kMaxLine) {
    buffer_.clear();
    return Fail(ErrorCode::kBadResponse,
                "watch stream: an event is longer than " + std::to_string(kMaxLine) + " bytes");
  }
  return {};
}

}  // namespace certctl::kube
