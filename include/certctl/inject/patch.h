#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "certctl/inject/targets.h"
#include "certctl/util/result.h"

namespace certctl::inject {

// The RFC 6902 JSON patch that puts `bundle_pem` into every caBundle slot of `object` that
// holds something else, or an empty optional when all of them already hold it (a steady
// cluster sees no write). Each write is preceded by `test` operations pinning the entry it
// belongs to (webhook name, conversion strategy), so a concurrent reordering of webhooks[]
// makes the server reject the patch instead of writing into the wrong entry. No other field
// is touched. Errors are those of ReadBundleSlots.
Result<std::optional<nlohmann::json>> BundlePatch(TargetKind kind, const nlohmann::json& object,
                                                  const std::string& bundle_pem);

// The RFC 6902 JSON patch that sets failurePolicy Fail on every entry of a webhook
// configuration whose failurePolicy is Ignore, each write guarded by `test`s of the entry's
// name and of Ignore, so that an entry reordered or changed meanwhile makes the server
// reject the patch; an empty optional when no entry has Ignore (and for the other kinds,
// which have no failurePolicy). Never turns Fail into Ignore; touches nothing else. With
// `closable`, only the entries it names (by webhooks[].name) are closed.
std::optional<nlohmann::json> FailClosedPatch(
    TargetKind kind, const nlohmann::json& object,
    const std::function<bool(const std::string& entry)>& closable = {});

}  // namespace certctl::inject
