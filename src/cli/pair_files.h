#pragma once

#include <filesystem>
#include <string>

#include "certctl/pki/validate.h"
#include "certctl/util/result.h"

namespace certctl::cli {

inline constexpr char kCaCertFile[] = "ca.crt";
inline constexpr char kCaKeyFile[] = "ca.key";
inline constexpr char kCertFile[] = "tls.crt";
inline constexpr char kKeyFile[] = "tls.key";

// Reads ca.crt, tls.crt, tls.key and (if present) ca.key from a folder; findings name the
// files by path. A missing file is an absent part (the validator reports it); a folder that
// does not exist is kNotFound and an unreadable file kIo.
Result<pki::PairSource> ReadPairFromDir(const std::filesystem::path& dir);

// Reads explicitly named files: each must exist and be readable.
Result<pki::PairSource> ReadPairFromFiles(const std::filesystem::path& cert,
                                          const std::filesystem::path& key,
                                          const std::filesystem::path& ca);

struct PairFiles {
  std::string ca_crt;
  std::string ca_key;  // may be empty: then ca.key is not written
  std::string tls_crt;
  std::string tls_key;
};

enum class Overwrite { kRefuse, kAllow };

// Writes the pair into `dir` (created if missing): certificates 0644, keys 0600, each file
// atomically. With Overwrite::kRefuse nothing is written when any of the files exists.
Status WritePairToDir(const std::filesystem::path& dir, const PairFiles& files,
                      Overwrite overwrite);

}  // namespace certctl::cli
