"""Bad certificate pairs in the Secret, made at test time with harness/badpki.py: encrypted
keys (PKCS#8 and the legacy "Proc-Type: 4,ENCRYPTED" form, for tls.key and ca.key), a leaf
that is a CA or not for servers, wildcard, IP and IDN SANs that do or do not cover what is
required, a 50-certificate ca.crt, 1 MiB of garbage as tls.crt, swapped and missing keys, a
ca.crt that is a leaf, expired and not-yet-valid certificates, RSA-1024 keys, SHA-1
signatures and keys of another pair.

For every case:
- `certctl check` exits 1 and prints one line per finding, each naming the Secret's key at
  fault (`secret/infra/webhook-server-cert[tls.key]`) and its code (docs/usage.md, check), or 0
  when the pair is in fact valid (the positive controls: covering wildcards, IPs, A-labels);
- `certctl job` on the Secret as another tool left it (no certctl label) exits 1 with one
  line naming the Secret and each key at fault, and writes nothing (docs/secret.md:
  external Secrets are never written);
- when only the server certificate is at fault, `certctl job` on the same Secret labelled
  managed re-issues the leaf from the stored CA and changes nothing else (docs/secret.md);
  an unusable ca.key starts a CA rotation in steps.
A few cases also run `certctl run`: not ready naming the key, or repaired and ready.
"""

import datetime
import os
import warnings

import pytest

from harness.badpki import (Authority, ec_key, encrypted_legacy, encrypted_pkcs8, hashes,
                            key_pem, now, rsa_key, secret_data, service_names)
from harness.certctl import split_issuer_record
from harness.corpus import (NS, SECRET, SECRET_OBJ, findings, hook_target, key_of, one_line,
                            pem_data)

DAY = datetime.timedelta(days=1)
VWC = "ValidatingWebhookConfiguration"
TARGET = ["--validating-webhook", "hook"]
NAMES = service_names("hook", NS)
GARBAGE_BYTES = 1024 * 1024 - 8 * 1024  # the Secret's data may hold 1 MiB in all


class Pki:
    """The module's certificates: one CA and a good leaf; cases derive the bad ones."""

    def __init__(self):
        self.ca = Authority("hook-ca")
        self.leaf = self.ca.issue(NAMES)
        self._noise = None

    def data(self, ca=None, leaf=None, **keys):
        """The four keys for `leaf` issued by `ca`, with keys replaced (None removes one)."""
        out = secret_data(ca or self.ca, leaf or self.leaf)
        out.update({k.replace("_", "."): v for k, v in keys.items()})
        return out

    def noise(self):
        """49 unrelated CAs, for a large ca.crt."""
        if self._noise is None:
            self._noise = "".join(Authority(f"noise-{i:02d}").cert_pem for i in range(49))
        return self._noise


@pytest.fixture(scope="module")
def pki():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cryptography deprecates signing with SHA-1
        yield Pki()


class Case:
    """build(pki) -> (Secret data, CA the targets hold); the expected findings as
    {(object, code)}; text the first finding's message must contain; whether a managed
    Secret gets its leaf re-issued."""

    def __init__(self, build, expected=(), mention=None, flags=(), leaf_repair=False):
        self.build = build
        self.expected = set(expected)
        self.mention = mention
        self.flags = list(flags)
        self.leaf_repair = leaf_repair


def leaf_case(make_leaf, expected, mention=None, flags=()):
    """A case where only the server certificate differs from the good pair (so a managed
    Secret gets it re-issued when it is at fault)."""
    def build(pki):
        leaf = make_leaf(pki)
        return pki.data(leaf=leaf), pki.ca.cert_pem
    return Case(build, expected, mention, flags, leaf_repair=bool(expected))


def keys_case(expected, mention=None, repair=False, **keys):
    """A case where keys of the good pair are replaced: keys(pki) -> {key: text or None}."""
    def build(pki):
        replaced = {k: (v(pki) if callable(v) else v) for k, v in keys.items()}
        return pki.data(**replaced), pki.ca.cert_pem
    return Case(build, expected, mention, (), repair)


def ca_case(make, expected, mention=None):
    """A case with another CA: make(pki) returns it, or (it, a leaf it issued); by default
    the leaf is the good one's names issued by it."""
    def build(pki):
        made = make(pki)
        ca, leaf = made if isinstance(made, tuple) else (made, made.issue(NAMES))
        return pki.data(ca=ca, leaf=leaf), ca.cert_pem
    return Case(build, expected, mention)


def expired_ca(pki):
    """A CA that ran out yesterday, and its leaf that ran out the day before."""
    start = now() - 400 * DAY
    ca = Authority("old-ca", not_before=start, not_after=now() - DAY)
    return ca, ca.issue(NAMES, not_before=start, not_after=now() - 2 * DAY)


def future_ca(pki):
    """A CA and its leaf valid only from the day after tomorrow (a clock far behind)."""
    start = now() + 2 * DAY
    ca = Authority("future-ca", not_before=start)
    return ca, ca.issue(NAMES, not_before=start)


def T(key, code):
    return (key_of(key), code)


WILDCARD_NAMES = NAMES + ["*.hook.example.com"]

CASES = {
    # encrypted keys
    "tls-key-pkcs8-encrypted": keys_case(
        {T("tls.key", "unparsable")}, "encrypted", repair=True,
        tls_key=lambda p: encrypted_pkcs8(p.leaf.key)),
    "tls-key-legacy-encrypted": keys_case(
        {T("tls.key", "unparsable")}, "encrypted", repair=True,
        tls_key=lambda p: encrypted_legacy(p.leaf.key)),
    "ca-key-pkcs8-encrypted": keys_case(
        {T("ca.key", "unparsable")}, "encrypted", ca_key=lambda p: encrypted_pkcs8(p.ca.key)),
    "ca-key-legacy-encrypted": keys_case(
        {T("ca.key", "unparsable")}, "encrypted", ca_key=lambda p: encrypted_legacy(p.ca.key)),
    # what the leaf may be used for
    # docs/secret.md: the server certificate is CA:FALSE; a leaf that may sign certificates
    # is not one to serve (and not one certctl would issue).
    "leaf-is-a-ca": leaf_case(lambda p: p.ca.issue(NAMES, is_ca=True),
                              {T("tls.crt", "wrong-usage")}),
    "leaf-client-auth-only": leaf_case(lambda p: p.ca.issue(NAMES, server_auth=False),
                                       {T("tls.crt", "wrong-usage")}, "serverAuth"),
    # wildcards
    "wildcard-covers-service-names": leaf_case(
        lambda p: p.ca.issue(["*.infra.svc", "hook", "hook.infra",
                              "hook.infra.svc.cluster.local"]), ()),
    "wildcard-too-broad": leaf_case(
        lambda p: p.ca.issue(["*.svc", "hook", "hook.infra", "hook.infra.svc.cluster.local"]),
        {T("tls.crt", "san-missing"), ("validatingwebhookconfiguration/hook",
                                       "target-name-not-covered")}, '"hook.infra.svc"'),
    "wildcard-covers-dns-name": leaf_case(
        lambda p: p.ca.issue(WILDCARD_NAMES), (),
        flags=["--dns-name", "api.hook.example.com", "--dns-name", "*.hook.example.com"]),
    "wildcard-one-label-only": leaf_case(
        lambda p: p.ca.issue(WILDCARD_NAMES), {T("tls.crt", "san-missing")},
        '"a.b.hook.example.com"', flags=["--dns-name", "a.b.hook.example.com"]),
    # IP SANs
    "ip-v4-v6-covered": leaf_case(
        lambda p: p.ca.issue(NAMES, ips=["10.0.0.1", "fd00::1"]), (),
        flags=["--ip", "10.0.0.1", "--ip", "fd00:0:0::1"]),
    "ip-v4-missing": leaf_case(
        lambda p: p.ca.issue(NAMES, ips=["fd00::1"]), {T("tls.crt", "san-missing")},
        '"10.0.0.1"', flags=["--ip", "10.0.0.1"]),
    "ip-v6-missing": leaf_case(
        lambda p: p.ca.issue(NAMES, ips=["10.0.0.1"]), {T("tls.crt", "san-missing")},
        '"fd00::2"', flags=["--ip", "fd00::2"]),
    # IDN
    "idn-a-label-covered": leaf_case(
        lambda p: p.ca.issue(NAMES + ["xn--bcher-kva.example"]), (),
        flags=["--dns-name", "xn--bcher-kva.example"]),
    "idn-raw-utf8-san-is-not-the-a-label": leaf_case(
        lambda p: p.ca.issue(NAMES + ["bücher.example"]), {T("tls.crt", "san-missing")},
        '"xn--bcher-kva.example"', flags=["--dns-name", "xn--bcher-kva.example"]),
    # ca.crt
    "ca-bundle-of-50-issuer-last": keys_case((), ca_crt=lambda p: p.noise() + p.ca.cert_pem),
    "ca-bundle-of-50-without-issuer": keys_case(
        {T("tls.crt", "untrusted-chain"), T("ca.key", "key-mismatch")}, "not signed",
        ca_crt=lambda p: p.noise() + Authority("noise-49").cert_pem),
    # The targets hold hook-ca, which did issue the leaf: they are not at fault.
    "ca-crt-is-the-leaf": keys_case(
        {T("ca.crt", "not-a-ca"), T("ca.key", "key-mismatch")}, "not a CA",
        ca_crt=lambda p: p.leaf.cert_pem),
    "ca-bundle-with-a-leaf-entry": keys_case(
        {T("ca.crt", "not-a-ca")}, "not a CA", ca_crt=lambda p: p.ca.cert_pem + p.leaf.cert_pem),
    "ca-crt-missing": keys_case({T("ca.crt", "missing")}, ca_crt=None),
    # garbage, swapped and empty keys
    "tls-crt-1mib-garbage": keys_case({T("tls.crt", "unparsable")}, repair=True,
                                      tls_crt=lambda p: os.urandom(GARBAGE_BYTES)),
    "keys-swapped": keys_case({T("tls.crt", "unparsable"), T("tls.key", "unparsable")},
                              "PRIVATE KEY", repair=True,
                              tls_crt=lambda p: p.leaf.key_pem,
                              tls_key=lambda p: p.leaf.cert_pem),
    "tls-key-empty": keys_case({T("tls.key", "missing")}, repair=True, tls_key=""),
    # validity periods
    "leaf-expired": leaf_case(lambda p: p.ca.issue(NAMES, not_before=now() - 30 * DAY,
                                                   not_after=now() - DAY),
                              {T("tls.crt", "expired")}),
    "leaf-not-yet-valid": leaf_case(lambda p: p.ca.issue(NAMES, not_before=now() + DAY),
                                    {T("tls.crt", "not-yet-valid")}),
    "ca-expired": ca_case(expired_ca, {T("ca.crt", "expired"), T("tls.crt", "expired")},
                          '"old-ca"'),
    "ca-not-yet-valid": ca_case(future_ca, {T("ca.crt", "not-yet-valid"),
                                            T("tls.crt", "not-yet-valid")}, '"future-ca"'),
    # weak keys and signatures
    "leaf-rsa-1024": leaf_case(lambda p: p.ca.issue(NAMES, key=rsa_key(1024)),
                               {T("tls.crt", "weak-key")}, "rsa-1024"),
    "ca-rsa-1024": ca_case(lambda p: Authority("weak-ca", key=rsa_key(1024)),
                           {T("ca.crt", "weak-key")}, "rsa-1024"),
    "leaf-sha1-signature": leaf_case(lambda p: p.ca.issue(NAMES, digest=hashes.SHA1()),
                                     {T("tls.crt", "weak-signature")}, "SHA-1"),
    "ca-sha1-self-signature": ca_case(lambda p: Authority("sha1-ca", digest=hashes.SHA1()),
                                      {T("ca.crt", "weak-signature")}, "SHA-1"),
    # keys of another pair
    "tls-key-of-another-pair": keys_case({T("tls.key", "key-mismatch")}, repair=True,
                                         tls_key=lambda p: key_pem(ec_key())),
    "ca-key-of-another-ca": keys_case({T("ca.key", "key-mismatch")},
                                      ca_key=lambda p: key_pem(ec_key())),
}

LEAF_REPAIRS = [name for name, case in CASES.items() if case.leaf_repair]


def put(stage, pki, name, managed):
    """The case's Secret (managed or external) and configuration hook holding its CA, the
    request log reset; returns the snapshot of both."""
    case = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data, target_ca = case.build(pki)
    stage.reset(secret=stage.secret_doc(data, managed=managed),
                targets=[hook_target(target_ca)])
    stage.cluster.reset_request_log()
    return stage.snapshot()


@pytest.mark.parametrize("name", list(CASES))
def test_check_reports_each_finding_once(stage, pki, name):
    case = CASES[name]
    before = put(stage, pki, name, managed=False)
    result = stage.certctl("check", *TARGET, *case.flags)
    assert result.stderr == "", result.stderr
    if not case.expected:
        assert result.returncode == 0, result.stdout
        assert result.stdout.startswith(f"ok: secret {NS}/{SECRET}"), result.stdout
    else:
        assert result.returncode == 1, (result.returncode, result.stdout)
        found = findings(result.stdout)
        assert {(obj, code) for obj, code, _ in found} == case.expected, result.stdout
        # One line per finding; a name the target calls is found once per entry calling it.
        lines = sum(len(hook_target()["webhooks"]) if code == "target-name-not-covered" else 1
                    for _, code in case.expected)
        assert len(found) == lines, result.stdout
        if case.mention:
            assert any(case.mention in message for _, _, message in found), result.stdout
    assert stage.writes() == []
    assert stage.snapshot() == before


@pytest.mark.parametrize("name", list(CASES))
def test_job_leaves_an_external_secret_alone(stage, pki, name):
    case = CASES[name]
    before = put(stage, pki, name, managed=False)
    result = stage.certctl("job", *TARGET, *case.flags, "--wait-for-targets", "5s")
    if not case.expected:
        assert result.returncode == 0, result.stderr
        secret_writes = [w for w in stage.writes() if w[1] == "secrets"]
        assert secret_writes == [], stage.writes()
        stored = pem_data(stage.secret())
        hook = stage.target(VWC, "hook")
        assert {w["clientConfig"]["caBundle"] for w in hook["webhooks"]} == \
            {stage.secret()["data"]["ca.crt"]}, "every caBundle gets ca.crt as it is"
        assert stored == pem_data(before[f"Secret/{SECRET}"])
        return
    assert result.returncode == 1, (result.returncode, result.stderr)
    line = one_line(result, "job")
    assert SECRET_OBJ in line, line
    for obj, _ in case.expected:
        if obj.startswith(SECRET_OBJ + "["):
            assert obj in line, f"{obj} not named: {line}"
    assert stage.writes() == []
    assert stage.snapshot() == before


@pytest.mark.parametrize("name", LEAF_REPAIRS)
def test_job_reissues_a_bad_leaf_of_a_managed_secret(stage, pki, name):
    case = CASES[name]
    before = put(stage, pki, name, managed=True)
    old = before[f"Secret/{SECRET}"]
    result = stage.certctl("job", *TARGET, *case.flags, "--wait-for-targets", "5s")
    assert result.returncode == 0, result.stderr
    assert "re-issued the server certificate" in result.stderr, result.stderr
    assert stage.writes() == [("update", "secrets", SECRET)]
    after = stage.snapshot()
    new = after.pop(f"Secret/{SECRET}")
    assert after == {k: v for k, v in before.items() if k != f"Secret/{SECRET}"}, \
        "a leaf re-issue changes no target"
    for field in ("type",):
        assert new[field] == old[field]
    assert new["metadata"].get("labels") == old["metadata"].get("labels")
    # Nothing but the record of who issued the new leaf.
    record, others = split_issuer_record(new["metadata"].get("annotations"))
    assert others == split_issuer_record(old["metadata"].get("annotations"))[1]
    assert record["certctl.io/issued-by"].startswith("certctl job "), record
    assert sorted(new["data"]) == sorted(old["data"])
    for key in ("ca.crt", "ca.key"):
        assert new["data"][key] == old["data"][key], f"{key} changed"
    for key in ("tls.crt", "tls.key"):
        assert new["data"][key] != old["data"][key], f"{key} not re-issued"
    again = stage.certctl("check", *TARGET, *case.flags)
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.parametrize("name", ["ca-key-pkcs8-encrypted", "ca-key-legacy-encrypted"])
def test_job_rotates_the_ca_of_a_managed_secret_whose_ca_key_is_encrypted(stage, pki, name):
    """An encrypted ca.key is no usable ca.key: a CA rotation in steps (docs/secret.md),
    the old CA still trusted beside the new one, every target given both."""
    before = put(stage, pki, name, managed=True)
    old = pem_data(before[f"Secret/{SECRET}"])
    result = stage.certctl("job", *TARGET, "--wait-for-targets", "5s")
    assert result.returncode == 0, result.stderr
    assert "step 1 of 3" in result.stderr and "step 2 of 3" in result.stderr, result.stderr
    assert stage.writes() == [("update", "secrets", SECRET),
                              ("patch", "validatingwebhookconfigurations", "hook"),
                              ("update", "secrets", SECRET)]
    secret = stage.secret()
    new = pem_data(secret)
    assert secret["metadata"]["annotations"]["certctl.io/rotation-phase"] == "overlapping"
    assert new["ca.crt"].count("BEGIN CERTIFICATE") == 2
    assert new["ca.crt"].endswith(old["ca.crt"]), "the old CA stays trusted after the new"
    assert "ENCRYPTED" not in new["ca.key"]
    hook = stage.target(VWC, "hook")
    assert {w["clientConfig"]["caBundle"] for w in hook["webhooks"]} == \
        {secret["data"]["ca.crt"]}
    assert stage.certctl("check", *TARGET).returncode == 0


# --- certctl run on a few of them -----------------------------------------------------------

RUN_FAILS = {"external-tls-key-pkcs8-encrypted": ("tls-key-pkcs8-encrypted", "tls.key"),
             "external-leaf-is-a-ca": ("leaf-is-a-ca", "tls.crt")}


@pytest.mark.parametrize("case_id", list(RUN_FAILS))
def test_run_is_not_ready_naming_the_key(stage, pki, case_id):
    name, key = RUN_FAILS[case_id]
    before = put(stage, pki, name, managed=False)
    with stage.run_process(*TARGET) as run:
        status, body = run.verdict()
        assert status == 503, (status, body)
        assert body.startswith("not ready: ") and body.count("\n") == 1, body
        assert key_of(key) in body, body
        assert not os.path.exists(run.ready_file)
        code, took = run.stop()
    assert code == 0 and took < 5, (code, took)
    assert stage.writes(events=True) == []
    assert stage.snapshot() == before


def test_run_repairs_swapped_keys_of_a_managed_secret(stage, pki):
    before = put(stage, pki, "keys-swapped", managed=True)
    with stage.run_process(*TARGET) as run:
        assert run.verdict() == (200, "ok\n")
        secret = pem_data(stage.secret())
        with open(os.path.join(run.cert_dir, "tls.crt"), encoding="utf-8") as f:
            assert f.read() == secret["tls.crt"]
        code, _ = run.stop()
    assert code == 0
    assert stage.writes() == [("update", "secrets", SECRET)]
    old = pem_data(before[f"Secret/{SECRET}"])
    assert secret["ca.crt"] == old["ca.crt"] and secret["ca.key"] == old["ca.key"]
    assert stage.snapshot()[f"{VWC}/hook"] == before[f"{VWC}/hook"]


def test_run_injects_a_50_certificate_ca_bundle_as_it_is(stage, pki):
    before = put(stage, pki, "ca-bundle-of-50-issuer-last", managed=False)
    with stage.run_process(*TARGET) as run:
        assert run.verdict() == (200, "ok\n")
        assert os.path.exists(run.ready_file)
        code, _ = run.stop()
    assert code == 0
    assert stage.writes() == [("patch", "validatingwebhookconfigurations", "hook")]
    hook = stage.target(VWC, "hook")
    bundle = before[f"Secret/{SECRET}"]["data"]["ca.crt"]
    assert [w["clientConfig"]["caBundle"] for w in hook["webhooks"]] == [bundle, bundle]
    assert stage.snapshot()[f"Secret/{SECRET}"] == before[f"Secret/{SECRET}"]
