#include "endpoints/http_request.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace certctl::endpoints {
namespace http_request_test {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(ParseRequestHead, ReadsAKubeletProbe) {
  const std::string probe =
      "GET /healthz HTTP/1.1\r\nHost: 10.0.0.7:8081\r\nUser-Agent: kube-probe/1.29\r\n"
      "Accept: */*\r\nConnection: close\r\n\r\n";
  const auto parsed = ParseRequestHead(probe);
  ASSERT_EQ(parsed.state, ParseState::kComplete);
  EXPECT_EQ(parsed.consumed, probe.size());
  EXPECT_EQ(parsed.head.method, "GET");
  EXPECT_EQ(parsed.head.path, "/healthz");
  EXPECT_TRUE(parsed.head.query.empty());
  EXPECT_EQ(parsed.head.minor_version, 1);
  EXPECT_FALSE(parsed.head.keep_alive);
  EXPECT_FALSE(parsed.head.has_body);
}

TEST(ParseRequestHead, DecodesTheQueryAndKeepsRepeatedNames) {
  const auto parsed = ParseRequestHead(
      "GET /ready%7A?exclude=serving&exclude=cert%2Dificate&&verbose&a+b=c%20d HTTP/1.1\r\n"
      "Host: x\r\n\r\n");
  ASSERT_EQ(parsed.state, ParseState::kComplete);
  EXPECT_EQ(parsed.head.path, "/readyz");
  EXPECT_THAT(parsed.head.query, ElementsAre(Pair("a b", "c d"), Pair("exclude", "serving"),
                                             Pair("exclude", "cert-ificate"), Pair("verbose", "")));
  EXPECT_TRUE(parsed.head.keep_alive);
}

TEST(ParseRequestHead, WaitsForTheBlankLine) {
  EXPECT_EQ(ParseRequestHead("").state, ParseState::kIncomplete);
  EXPECT_EQ(ParseRequestHead("GET /healthz HTTP/1.1\r\n").state, ParseState::kIncomplete);
  EXPECT_EQ(ParseRequestHead("GET /healthz HTTP/1.1\r\nHost: x\r\n").state,
            ParseState::kIncomplete);
  // Bare line feeds end lines too.
  EXPECT_EQ(ParseRequestHead("GET /healthz HTTP/1.1\nHost: x\n\n").state, ParseState::kComplete);
}

TEST(ParseRequestHead, ConsumesOnlyTheFirstOfPipelinedRequests) {
  const std::string first = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
  const auto parsed = ParseRequestHead(first + "GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(parsed.state, ParseState::kComplete);
  EXPECT_EQ(parsed.consumed, first.size());
  EXPECT_EQ(parsed.head.path, "/a");
}

TEST(ParseRequestHead, KeepAliveFollowsTheVersionAndConnection) {
  EXPECT_TRUE(ParseRequestHead("GET / HTTP/1.1\r\nHost: x\r\n\r\n").head.keep_alive);
  EXPECT_FALSE(
      ParseRequestHead("GET / HTTP/1.1\r\nHost: x\r\nConnection: Keep-Alive, CLOSE\r\n\r\n")
          .head.keep_alive);
  EXPECT_FALSE(ParseRequestHead("GET / HTTP/1.0\r\n\r\n").head.keep_alive);
  const auto kept = ParseRequestHead("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(kept.head.minor_version, 0);
  EXPECT_TRUE(kept.head.keep_alive);
}

TEST(ParseRequestHead, NoticesABody) {
  EXPECT_TRUE(
      ParseRequestHead("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n").head.has_body);
  EXPECT_TRUE(ParseRequestHead("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
                  .head.has_body);
  EXPECT_FALSE(
      ParseRequestHead("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").head.has_body);
}

TEST(ParseRequestHead, MalformedHeadsAreBadRequests) {
  for (const char* head : {
           "GET /healthz\r\nHost: x\r\n\r\n",                // no version
           "GET  /healthz HTTP/1.1\r\nHost: x\r\n\r\n",      // two spaces
           "GET /healthz HTTP/1.1 \r\nHost: x\r\n\r\n",      // trailing space
           "G(T /healthz HTTP/1.1\r\nHost: x\r\n\r\n",       // not a token
           "GET healthz HTTP/1.1\r\nHost: x\r\n\r\n",        // not origin-form
           "GET /a#b HTTP/1.1\r\nHost: x\r\n\r\n",           // fragment
           "GET /a%zz HTTP/1.1\r\nHost: x\r\n\r\n",          // bad escape
           "GET /a%00 HTTP/1.1\r\nHost: x\r\n\r\n",          // NUL
           "GET /?a=%4 HTTP/1.1\r\nHost: x\r\n\r\n",         // short escape
           "GET / HTTP/1.1\r\n\r\n",                         // no Host
           "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",   // two Hosts
           "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",   // obsolete folding
           "GET / HTTP/1.1\r\nHost : x\r\n\r\n",             // space before colon
           "GET / HTTP/1.1\r\nHost: x\r\nNo colon\r\n\r\n",  // not a field
           "GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n",           // bare CR in a value
           "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
           "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
           "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
           "GET / HTTP/x.1\r\nHost: x\r\n\r\n",
       }) {
    EXPECT_EQ(ParseRequestHead(head).state, ParseState::kBadRequest) << head;
  }
  constexpr char kNulInValue[] = "GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n";
  EXPECT_EQ(ParseRequestHead(std::string(kNulInValue, sizeof(kNulInValue) - 1)).state,
            ParseState::kBadRequest);
}

TEST(ParseRequestHead, OtherMajorVersionsAreNotServed) {
  EXPECT_EQ(ParseRequestHead("GET / HTTP/2.0\r\nHost: x\r\n\r\n").state, ParseState::kBadVersion);
}

TEST(ParseRequestHead, AHeadOverTheCapIsTooLarge) {
  const std::string start = "GET / HTTP/1.1\r\nHost: x\r\nX-Filler: ";
  EXPECT_EQ(ParseRequestHead(start + std::string(kMaxRequestHead, 'a')).state,
            ParseState::kHeadTooLarge);
  // Just under the cap, complete, it is served.
  const std::string fits =
      start + std::string(kMaxRequestHead - start.size() - 4, 'a') + "\r\n\r\n";
  EXPECT_EQ(fits.size(), kMaxRequestHead);
  EXPECT_EQ(ParseRequestHead(fits).state, ParseState::kComplete);
}

}  // namespace
}  // namespace http_request_test
}  // namespace certctl::endpoints
