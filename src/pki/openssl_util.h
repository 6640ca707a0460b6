#pragma once

// Private to the pki module: RAII ownership of OpenSSL objects, OpenSSL error reporting,
// and the small PEM / time helpers every pki source needs.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "certctl/pki/key.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::pki::internal {

// Calls the OpenSSL free function `Free` on destruction; one alias per type below.
template <auto Free>
struct OpensslDeleter {
  template <typename T>
  void operator()(T* object) const {
    Free(object);
  }
};

using X509Ptr = std::unique_ptr<X509, OpensslDeleter<X509_free>>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, OpensslDeleter<EVP_PKEY_free>>;
using EvpPkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, OpensslDeleter<EVP_PKEY_CTX_free>>;
using BioPtr = std::unique_ptr<BIO, OpensslDeleter<BIO_free_all>>;
using X509NamePtr = std::unique_ptr<X509_NAME, OpensslDeleter<X509_NAME_free>>;
using X509ExtensionPtr = std::unique_ptr<X509_EXTENSION, OpensslDeleter<X509_EXTENSION_free>>;
using X509StorePtr = std::unique_ptr<X509_STORE, OpensslDeleter<X509_STORE_free>>;
using X509StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, OpensslDeleter<X509_STORE_CTX_free>>;
using Asn1IntegerPtr = std::unique_ptr<ASN1_INTEGER, OpensslDeleter<ASN1_INTEGER_free>>;
using Asn1TimePtr = std::unique_ptr<ASN1_TIME, OpensslDeleter<ASN1_TIME_free>>;
using Asn1OctetStringPtr =
    std::unique_ptr<ASN1_OCTET_STRING, OpensslDeleter<ASN1_OCTET_STRING_free>>;
using Asn1Ia5StringPtr = std::unique_ptr<ASN1_IA5STRING, OpensslDeleter<ASN1_IA5STRING_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpensslDeleter<BN_free>>;
using GeneralNamePtr = std::unique_ptr<GENERAL_NAME, OpensslDeleter<GENERAL_NAME_free>>;
// GENERAL_NAMES_free frees the stack and every GENERAL_NAME in it (sk_GENERAL_NAME_pop_free).
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, OpensslDeleter<GENERAL_NAMES_free>>;
using BasicConstraintsPtr =
    std::unique_ptr<BASIC_CONSTRAINTS, OpensslDeleter<BASIC_CONSTRAINTS_free>>;

// Memory that OpenSSL allocated with OPENSSL_malloc (BN_bn2hex, ASN1_STRING_to_UTF8, ...).
struct OpensslFree {
  void operator()(void* memory) const { OPENSSL_free(memory); }
};
using OpensslString = std::unique_ptr<char, OpensslFree>;
using OpensslBytes = std::unique_ptr<unsigned char, OpensslFree>;

// Drains the thread's OpenSSL error queue into "reason; reason" (empty when it was empty).
std::string OpensslErrors();

// `what` plus whatever the error queue holds: "what: reason; reason". Drains the queue.
Error OpensslError(std::string_view what, ErrorCode code = ErrorCode::kInternal);

// A read-only memory BIO over `data`; the data must outlive the BIO.
Result<BioPtr> ReadBio(std::string_view data);

// An empty, writable memory BIO.
Result<BioPtr> WriteBio();

// Everything written to a memory BIO.
std::string BioContents(BIO* bio);

// One "-----BEGIN <label>-----" ... "-----END <label>-----" block found in text.
struct PemBlock {
  std::string label;
  std::string_view text;  // from BEGIN to the end of the END line, inside the scanned input
};

// Finds the PEM blocks of `input`, ignoring text between them. kInvalidArgument for
// input that holds no block at all (empty, DER, garbage) or a block without its END
// line (truncated); `what` names the expected content in the message ("certificate").
Result<std::vector<PemBlock>> ScanPem(std::string_view input, std::string_view what);

// ASN1_TIME <-> TimePoint (second precision, UTC).
Result<TimePoint> ToTimePoint(const ASN1_TIME* time);
Result<Asn1TimePtr> ToAsn1Time(TimePoint time);

// Describes any public or private key (key.cc).
KeyDescription DescribeKey(const EVP_PKEY* key);

}  // namespace certctl::pki::internal
