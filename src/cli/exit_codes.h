#pragma once

namespace certctl::cli {

// Every command: 0 success, 1 the operation failed (check: found something), 2 usage
// error or, for check, could not run.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

}  // namespace certctl::cli
