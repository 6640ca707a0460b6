"""Certificates and keys that are wrong on purpose, made at test time with Debian's
python3-cryptography (tests/badinput/).

    ca = Authority("hook-ca")                       # ECDSA P-256, CA:TRUE, 10 years
    leaf = ca.issue(service_names("hook", "infra"), ips=["10.0.0.1"])
    secret_data(ca, leaf)                           # {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    encrypted_pkcs8(leaf.key)                       # "-----BEGIN ENCRYPTED PRIVATE KEY-----"
    encrypted_legacy(leaf.key)                      # "Proc-Type: 4,ENCRYPTED"

Every knob a bad pair needs is a keyword: validity (`not_before`, `not_after`), key
(`key=rsa_key(1024)`), digest (`digest=hashes.SHA1()`), basicConstraints of a leaf
(`is_ca=True`), SANs (DNS names as given, IDN A-labels or raw UTF-8; IP addresses).
"""

import datetime
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Authority", "Issued", "ec_key", "rsa_key", "key_pem", "cert_pem", "encrypted_pkcs8",
           "encrypted_legacy", "service_names", "secret_data", "now", "hashes"]

PASSPHRASE = b"correct horse battery staple"


def now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def ec_key():
    return ec.generate_private_key(ec.SECP256R1())


def rsa_key(bits=2048):
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def key_pem(key):
    """PKCS#8 PEM, unencrypted (what certctl writes)."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def encrypted_pkcs8(key, passphrase=PASSPHRASE):
    """PKCS#8 PEM encrypted with a passphrase: "-----BEGIN ENCRYPTED PRIVATE KEY-----"."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(passphrase)).decode()


def encrypted_legacy(key, passphrase=PASSPHRASE):
    """The traditional OpenSSL format with PEM encryption headers ("Proc-Type: 4,ENCRYPTED",
    "DEK-Info: ..."), as `openssl rsa -aes256` or `openssl ec -aes256` write it."""
    pem = key.private_bytes(serialization.Encoding.PEM,
                            serialization.PrivateFormat.TraditionalOpenSSL,
                            serialization.BestAvailableEncryption(passphrase)).decode()
    assert "Proc-Type: 4,ENCRYPTED" in pem, pem
    return pem


def cert_pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def service_names(service, namespace, domain="cluster.local"):
    """The DNS names certctl requires for a Service, in its order."""
    return [f"{service}.{namespace}.svc", service, f"{service}.{namespace}",
            f"{service}.{namespace}.svc.{domain}"]


def _dns(name):
    # cryptography refuses non-ASCII in DNSName; a raw UTF-8 SAN is built from its bytes.
    try:
        name.encode("ascii")
        return x509.DNSName(name)
    except UnicodeEncodeError:
        return x509.DNSName._init_without_validation(name)


class Issued:
    """A certificate and its private key."""

    def __init__(self, cert, key):
        self.cert = cert
        self.key = key

    @property
    def cert_pem(self):
        return cert_pem(self.cert)

    @property
    def key_pem(self):
        return key_pem(self.key)


class Authority(Issued):
    """A self-signed CA (or, with is_ca=False, a self-signed certificate that is not one)."""

    def __init__(self, name="hook-ca", key=None, not_before=None, not_after=None,
                 digest=None, is_ca=True, key_cert_sign=True):
        key = key or ec_key()
        start = not_before or now() - datetime.timedelta(hours=1)
        end = not_after or start + datetime.timedelta(days=3650)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=is_ca, path_length=0 if is_ca
                                                        else None), critical=True)
                   .add_extension(x509.KeyUsage(
                       digital_signature=not is_ca, content_commitment=False,
                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                       key_cert_sign=is_ca and key_cert_sign, crl_sign=is_ca,
                       encipher_only=False, decipher_only=False), critical=True)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                                  critical=False))
        super().__init__(builder.sign(key, digest or hashes.SHA256()), key)

    def issue(self, dns_names, ips=(), key=None, not_before=None, not_after=None, digest=None,
              is_ca=False, common_name=None, server_auth=True):
        """A server certificate signed by this CA."""
        key = key or ec_key()
        start = not_before or now() - datetime.timedelta(hours=1)
        end = not_after or start + datetime.timedelta(days=365)
        cn = common_name or (dns_names[0] if dns_names else "server")
        sans = [_dns(n) for n in dns_names] + [x509.IPAddress(ipaddress.ip_address(i))
                                                for i in ips]
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server_auth else \
            ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None),
                                  critical=True)
                   .add_extension(x509.KeyUsage(
                       digital_signature=True, content_commitment=False,
                       key_encipherment=isinstance(key, rsa.RSAPrivateKey),
                       data_encipherment=False, key_agreement=False, key_cert_sign=is_ca,
                       crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                       self.key.public_key()), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return Issued(builder.sign(self.key, digest or hashes.SHA256()), key)


def secret_data(ca, leaf, ca_bundle=None):
    """The four keys of certctl's Secret (PEM text) for `leaf` issued by `ca`."""
    return {"ca.crt": ca_bundle if ca_bundle is not None else ca.cert_pem,
            "ca.key": ca.key_pem, "tls.crt": leaf.cert_pem, "tls.key": leaf.key_pem}
