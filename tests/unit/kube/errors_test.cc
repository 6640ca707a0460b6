#include "kube/errors.h"

#include <string>

#include <gtest/gtest.h>

#include "certctl/kube/client.h"

#include "fakes/fake_transport.h"

namespace certctl::kube {
namespace errors_test {
namespace {

using certctl::testing::FakeReply;

HttpResponse ToResponse(const FakeReply& reply) {
  return HttpResponse{reply.status, reply.headers, reply.body};
}

struct StatusCase {
  int status;
  const char* reason;
  ErrorCode expected;
};

TEST(KubeErrors, MapsEveryStatusToWhatTheCallerShouldDo) {
  const StatusCase cases[] = {
      {400, "BadRequest", ErrorCode::kInvalidArgument},
      {401, "Unauthorized", ErrorCode::kUnauthenticated},
      {403, "Forbidden", ErrorCode::kPermissionDenied},
      {404, "NotFound", ErrorCode::kNotFound},
      {409, "AlreadyExists", ErrorCode::kAlreadyExists},
      {409, "Conflict", ErrorCode::kConflict},
      {410, "Expired", ErrorCode::kExpired},
      {422, "Invalid", ErrorCode::kInvalidArgument},
      {429, "TooManyRequests", ErrorCode::kUnavailable},
      {500, "InternalError", ErrorCode::kUnavailable},
      {503, "ServiceUnavailable", ErrorCode::kUnavailable},
      {504, "Timeout", ErrorCode::kUnavailable},
      {415, "UnsupportedMediaType", ErrorCode::kInternal},
      {406, "NotAcceptable", ErrorCode::kInternal},
  };
  for (const auto& c : cases) {
    const Error error =
        ErrorFromResponse(ToResponse(FakeReply::Status(c.status, c.reason, "server says no")),
                          "get secrets infra/webhook-server-cert");
    EXPECT_EQ(error.code(), c.expected) << c.status << " " << c.reason;
    EXPECT_EQ(error.message(), "get secrets infra/webhook-server-cert: server says no");
    EXPECT_FALSE(error.retry_after().has_value());
  }
}

TEST(KubeErrors, TextPlain429CarriesRetryAfter) {
  const auto reply = FakeReply::Text(429, "Too many requests, please try again later.\n")
                         .WithHeader("retry-after", "3");
  const Error error = ErrorFromResponse(ToResponse(reply), "list secrets");
  EXPECT_EQ(error.code(), ErrorCode::kUnavailable);
  EXPECT_EQ(error.message(), "list secrets: Too many requests, please try again later.");
  ASSERT_TRUE(error.retry_after().has_value());
  EXPECT_EQ(*error.retry_after(), std::chrono::seconds(3));
}

TEST(KubeErrors, StatusRetryAfterSecondsIsTheFallback) {
  auto reply = FakeReply::Json(429, {{"kind", "Status"},
                                     {"reason", "TooManyRequests"},
                                     {"message", "slow down"},
                                     {"details", {{"retryAfterSeconds", 7}}},
                                     {"code", 429}});
  Error error = ErrorFromResponse(ToResponse(reply), "");
  EXPECT_EQ(error.message(), "slow down");
  ASSERT_TRUE(error.retry_after().has_value());
  EXPECT_EQ(*error.retry_after(), std::chrono::seconds(7));

  reply.WithHeader("retry-after", "2");
  error = ErrorFromResponse(ToResponse(reply), "");
  EXPECT_EQ(*error.retry_after(), std::chrono::seconds(2));
}

TEST(KubeErrors, IgnoresRetryAfterDates) {
  const auto reply =
      FakeReply::Text(503, "busy").WithHeader("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT");
  EXPECT_FALSE(RetryAfterHeader(ToResponse(reply)).has_value());
  EXPECT_FALSE(ErrorFromResponse(ToResponse(reply), "x").retry_after().has_value());
}

TEST(KubeErrors, NonStatusBodiesAreQuotedOnOneShortLine) {
  const std::string html = "<html>\n<body>\n" + std::string(1000, 'x') + "\n</body></html>";
  const Error error = ErrorFromResponse(ToResponse(FakeReply::Text(502, html)), "get x");
  EXPECT_EQ(error.code(), ErrorCode::kUnavailable);
  EXPECT_EQ(error.message().find('\n'), std::string::npos);
  EXPECT_LT(error.message().size(), 300u);
  EXPECT_EQ(error.message().rfind("get x: <html> <body> xxx", 0), 0u);
}

TEST(KubeErrors, EmptyBodyStillSaysWhatHappened) {
  HttpResponse response;
  response.status = 500;
  const Error error = ErrorFromResponse(response, "delete secrets a/b");
  EXPECT_EQ(error.code(), ErrorCode::kUnavailable);
  EXPECT_NE(error.message().find("HTTP 500"), std::string::npos);
}

TEST(KubeErrors, StatusWithoutMessageUsesTheReason) {
  const auto reply = FakeReply::Json(401, {{"kind", "Status"}, {"reason", "Unauthorized"}});
  const Error error = ErrorFromResponse(ToResponse(reply), "get secrets a/b");
  EXPECT_EQ(error.code(), ErrorCode::kUnauthenticated);
  EXPECT_EQ(error.message(), "get secrets a/b: Unauthorized");
}

TEST(KubeErrors, WatchErrorEventStatusMapsTheSameWay) {
  const nlohmann::json gone = {{"kind", "Status"},
                               {"status", "Failure"},
                               {"message", "too old resource version: 90 (120)"},
                               {"reason", "Expired"},
                               {"code", 410}};
  const Error error = ErrorFromStatus(gone, "watch secrets");
  EXPECT_EQ(error.code(), ErrorCode::kExpired);
  EXPECT_EQ(error.message(), "watch secrets: too old resource version: 90 (120)");

  EXPECT_EQ(ErrorFromStatus({{"reason", "Expired"}}, "").code(), ErrorCode::kExpired);
  EXPECT_EQ(ErrorFromStatus({{"reason", "Gone"}}, "").code(), ErrorCode::kExpired);
  EXPECT_EQ(ErrorFromStatus({{"code", 500}, {"reason", "InternalError"}}, "").code(),
            ErrorCode::kUnavailable);
  EXPECT_EQ(ErrorFromStatus({{"code", 403}}, "").code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(ErrorFromStatus("not an object", "").code(), ErrorCode::kInternal);
}

}  // namespace
}  // namespace errors_test
}  // namespace certctl::kube
