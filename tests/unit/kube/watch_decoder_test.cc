#include "certctl/kube/watch_decoder.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace certctl::kube {
namespace watch_decoder_test {
namespace {

// Three events as the API server writes them, with strings that contain an escaped newline,
// braces and non-ASCII text, so a decoder that splits on anything but the real line end fails.
const std::string kStream =
    R"js({"type":"ADDED","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s1","resourceVersion":"101"},"data":{"note":"bGluZQ=="},"stringData":{"x":"a\nb {\"c\"} \u00e9 \u2603"}}})js"
    "\n"
    R"js({"type":"MODIFIED","object":{"kind":"Secret","metadata":{"name":"s1","resourceVersion":"102"}}})js"
    "\n"
    R"js({"type":"BOOKMARK","object":{"kind":"Secret","apiVersion":"v1","metadata":{"resourceVersion":"150"}}})js"
    "\n"
    R"js({"type":"DELETED","object":{"kind":"Secret","metadata":{"name":"s1","resourceVersion":"151"}}})js"
    "\n"
    R"js({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 90 (120)","reason":"Expired","code":410}})js"
    "\n";

std::vector<WatchEvent> DecodeWhole(const std::string& stream) {
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  EXPECT_TRUE(decoder.Feed(stream, events));
  EXPECT_EQ(decoder.pending(), 0u);
  return events;
}

void ExpectSameEvents(const std::vector<WatchEvent>& actual,
                      const std::vector<WatchEvent>& expected, const std::string& context) {
  ASSERT_EQ(actual.size(), expected.size()) << context;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i].type, expected[i].type) << context << " event " << i;
    EXPECT_EQ(actual[i].object, expected[i].object) << context << " event " << i;
  }
}

TEST(WatchDecoder, DecodesEveryEventType) {
  const auto events = DecodeWhole(kStream);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].type, WatchEventType::kAdded);
  EXPECT_EQ(events[0].object["metadata"]["name"], "s1");
  EXPECT_EQ(events[0].object["stringData"]["x"], "a\nb {\"c\"} \u00e9 \u2603");
  EXPECT_EQ(events[1].type, WatchEventType::kModified);
  EXPECT_EQ(events[2].type, WatchEventType::kBookmark);
  EXPECT_EQ(events[2].object["metadata"]["resourceVersion"], "150");
  EXPECT_EQ(events[3].type, WatchEventType::kDeleted);
  EXPECT_EQ(events[4].type, WatchEventType::kError);
  EXPECT_EQ(events[4].object["code"], 410);
}

TEST(WatchDecoder, SplitAtEveryByteBoundaryDecodesIdentically) {
  const auto expected = DecodeWhole(kStream);
  for (std::size_t split = 0; split <= kStream.size(); ++split) {
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    ASSERT_TRUE(decoder.Feed(std::string_view(kStream).substr(0, split), events));
    ASSERT_TRUE(decoder.Feed(std::string_view(kStream).substr(split), events));
    EXPECT_EQ(decoder.pending(), 0u);
    ExpectSameEvents(events, expected, "split at " + std::to_string(split));
  }
}

TEST(WatchDecoder, OneByteAtATimeDecodesIdentically) {
  const auto expected = DecodeWhole(kStream);
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  for (const char c : kStream) {
    ASSERT_TRUE(decoder.Feed(std::string_view(&c, 1), events));
  }
  ExpectSameEvents(events, expected, "byte by byte");
}

TEST(WatchDecoder, EveryPairOfSplitsDecodesIdentically) {
  // Three pieces, both cut points anywhere within the first two events.
  const auto expected = DecodeWhole(kStream);
  const std::size_t limit = kStream.find('\n', kStream.find('\n') + 1) + 2;
  for (std::size_t first = 0; first <= limit; first += 3) {
    for (std::size_t second = first; second <= limit; ++second) {
      WatchDecoder decoder;
      std::vector<WatchEvent> events;
      const std::string_view stream(kStream);
      ASSERT_TRUE(decoder.Feed(stream.substr(0, first), events));
      ASSERT_TRUE(decoder.Feed(stream.substr(first, second - first), events));
      ASSERT_TRUE(decoder.Feed(stream.substr(second), events));
      ExpectSameEvents(events, expected,
                       "splits " + std::to_string(first) + "," + std::to_string(second));
    }
  }
}

TEST(WatchDecoder, KeepsAnIncompleteLineUntilItsNewline) {
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  const std::string line = R"js({"type":"ADDED","object":{"metadata":{"name":"a"}}})js";
  ASSERT_TRUE(decoder.Feed(line, events));
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(decoder.pending(), line.size());
  ASSERT_TRUE(decoder.Feed("\n", events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(decoder.pending(), 0u);
}

TEST(WatchDecoder, AcceptsCrLfAndBlankLines) {
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  ASSERT_TRUE(decoder.Feed("\r\n\n{\"type\":\"ADDED\",\"object\":{}}\r\n  \n", events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, WatchEventType::kAdded);
}

TEST(WatchDecoder, MalformedLineIsInvalidArgumentAndNotQuoted) {
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  auto fed =
      decoder.Feed("{\"type\":\"ADDED\",\"object\":{\"data\":{\"tls.key\":\"c2VjcmV0\"}\n", events);
  ASSERT_FALSE(fed);
  EXPECT_EQ(fed.error().code(), ErrorCode::kBadResponse);
  EXPECT_NE(fed.error().message().find("malformed"), std::string::npos);
  EXPECT_EQ(fed.error().message().find("c2VjcmV0"), std::string::npos);
}

TEST(WatchDecoder, RejectsUnknownTypeAndMissingParts) {
  for (const std::string line :
       {R"js({"type":"RENAMED","object":{}})js", R"js({"object":{}})js", R"js({"type":"ADDED"})js",
        R"js({"type":"ADDED","object":"x"})js", R"js(["ADDED"])js"}) {
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    auto fed = decoder.Feed(line + "\n", events);
    ASSERT_FALSE(fed) << line;
    EXPECT_EQ(fed.error().code(), ErrorCode::kBadResponse) << line;
    EXPECT_TRUE(events.empty()) << line;
  }
}

TEST(WatchDecoder, EventsBeforeABadLineAreStillDelivered) {
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  auto fed = decoder.Feed("{\"type\":\"ADDED\",\"object\":{}}\nnot json\n", events);
  ASSERT_FALSE(fed);
  EXPECT_EQ(events.size(), 1u);
}

// Valid JSON that nlohmann cannot hold (a number past a double) is a malformed event, not an
// exception out of Feed (found by fuzz/watch_decoder.cc).
TEST(WatchDecoder, NumberOutOfRangeIsAMalformedEvent) {
  for (const std::string line :
       {R"js({"type":"ADDED","object":{"size":1e999}})js",
        R"js({"type":"MODIFIED","object":{"metadata":{"generation":-4E0000001225770412}}})js"}) {
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    Status fed;
    ASSERT_NO_THROW(fed =
                        decoder.Feed("{\"type\":\"ADDED\",\"object\":{}}\n" + line + "\n", events))
        << line;
    ASSERT_FALSE(fed) << line;
    EXPECT_EQ(fed.error().code(), ErrorCode::kBadResponse) << line;
    EXPECT_NE(fed.error().message().find("malformed"), std::string::npos) << line;
    EXPECT_EQ(events.size(), 1u) << line;
  }
}

}  // namespace
}  // namespace watch_decoder_test
}  // namespace certctl::kube
