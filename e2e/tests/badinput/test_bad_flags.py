"""Bad command lines: unknown flags, malformed durations, label selectors, addresses, IP
addresses and DNS names (IDN as raw UTF-8 among them), validities that do not outlast
--renew-before, names of objects (Secret, Lease, targets, namespace) the API server would
refuse.

docs/exit-codes.md: a usage error is exit 2 for every command, with one line naming what is
wrong; `run` exits 2 at once (it never gets as far as reporting on /readyz). A healthy
managed Secret and a configuration holding its CA are in the emulator: a usage error must
leave them exactly as they are, and is found before certctl sends a single request.
"""

import socket
import time
from types import SimpleNamespace

import pytest

from harness.corpus import one_line

TARGET = ["--validating-webhook", "hook"]
RUN_EXIT_BOUND = 3.0  # "at once", with room for a loaded 2-core machine


def usage_error(stage, command, args):
    """Runs `certctl COMMAND ... ARGS` (run: waits for it to exit by itself) and returns
    (result-like object with returncode and stderr, seconds taken)."""
    if command != "run":
        started = time.monotonic()
        result = stage.certctl(command, *args)
        return result, time.monotonic() - started
    with stage.run_process(*args) as run:
        code = run.exit_code(RUN_EXIT_BOUND)
        took = time.monotonic() - run.started
        assert code is not None, (f"certctl run {' '.join(args)} still running after "
                                  f"{RUN_EXIT_BOUND:g}s; /readyz {run.get('/readyz')}\n"
                                  f"{run.log()}")
        return SimpleNamespace(returncode=code, stderr=run.log()), took


def assert_usage_error(stage, before, command, args, *named):
    result, took = usage_error(stage, command, args)
    assert result.returncode == 2, (result.returncode, result.stderr)
    line = one_line(result, command)
    for text in named:
        assert text in line, f"the message does not name {text!r}: {line}"
    if command == "run":
        assert took < RUN_EXIT_BOUND, took
    assert stage.requests_by_certctl() == [], \
        "a usage error must be found before any request is sent"
    assert stage.writes() == []
    assert stage.snapshot() == before
    return line


# --- unknown flags --------------------------------------------------------------------

UNKNOWN = {
    "check-unknown-flag": ("check", ["--no-such-flag"], "--no-such-flag"),
    "job-unknown-flag-with-value": ("job", ["--bogus=1"], "--bogus"),
    "job-plural-typo": ("job", ["--validating-webhooks", "hook"], "--validating-webhooks"),
    "run-unknown-flag": ("run", ["--resync-period", "1h"], "--resync-period"),
}


@pytest.mark.parametrize("case", list(UNKNOWN))
def test_unknown_flag(healthy, case):
    command, args, flag = UNKNOWN[case]
    before = healthy.snapshot()
    assert_usage_error(healthy, before, command, [*TARGET, *args], flag)


# --- durations --------------------------------------------------------------------------

# One duration flag per command; the values the corpus asks for.
DURATION_FLAGS = {"check": "--renew-before", "job": "--wait-for-targets", "run": "--resync"}
DURATIONS = {"no-unit": "10", "unknown-unit": "1x", "negative": "-5m",
             "beyond-100y": "999999y", "empty": ""}


@pytest.mark.parametrize("value_id", list(DURATIONS))
@pytest.mark.parametrize("command", list(DURATION_FLAGS))
def test_malformed_duration(healthy, command, value_id):
    value = DURATIONS[value_id]
    flag = DURATION_FLAGS[command]
    before = healthy.snapshot()
    named = [flag] + ([f'"{value}"'] if value else [])
    assert_usage_error(healthy, before, command, [*TARGET, flag, value], *named)


def test_empty_duration_after_equals_sign(healthy):
    """`--renew-before=` is an empty value, not a request to take the next argument."""
    before = healthy.snapshot()
    line = assert_usage_error(healthy, before, "check",
                              ["--renew-before=", *TARGET], "--renew-before")
    assert "--validating-webhook" not in line, line


# --- label selectors ----------------------------------------------------------------------

SELECTORS = {
    "check-unclosed-set": ("check", "app in (a"),
    "check-no-key": ("check", "=x"),
    "job-trailing-comma": ("job", "a=b,"),
    "job-bang-without-operator": ("job", "app!"),
    "run-unclosed-set": ("run", "app in (a"),
    "run-two-words": ("run", "a b"),
    "job-blank": ("job", "  "),
    "check-empty": ("check", ""),
}


@pytest.mark.parametrize("case", list(SELECTORS))
def test_malformed_label_selector(healthy, case):
    command, selector = SELECTORS[case]
    before = healthy.snapshot()
    assert_usage_error(healthy, before, command, ["--webhook-selector", selector],
                       "--webhook-selector")


CONTROLLER_NAMESPACES = {
    "selector-blank": (["--namespace-selector", " "], "--namespace-selector"),
    "selector-unclosed-set": (["--namespace-selector", "team in (a"], "--namespace-selector"),
    "selector-and-names": (["--namespace-selector", "a=b", "-n", "team-a"],
                           "--namespace-selector"),
    "namespace-not-a-label": (["-n", "team.a"], "--namespace"),
}


@pytest.mark.parametrize("case", list(CONTROLLER_NAMESPACES))
def test_controller_namespaces_by_name_or_by_selector(healthy, case):
    args, named = CONTROLLER_NAMESPACES[case]
    before = healthy.snapshot()
    assert_usage_error(healthy, before, "controller", args, named)


# --- addresses (run) ----------------------------------------------------------------------

ADDRESSES = {
    "health-no-port": ("--health-addr", "nope"),
    "health-port-out-of-range": ("--health-addr", ":99999"),
    "metrics-unclosed-bracket": ("--metrics-addr", "[::1"),
    "serving-no-port": ("--serving-addr", "localhost"),
    "serving-no-host": ("--serving-addr", ":9443"),
    "serving-port-not-a-number": ("--serving-addr", "127.0.0.1:abc"),
}


@pytest.mark.parametrize("case", list(ADDRESSES))
def test_malformed_address(healthy, case):
    flag, value = ADDRESSES[case]
    before = healthy.snapshot()
    with healthy.run_process(*TARGET, flags={flag: value}) as run:
        code = run.exit_code(RUN_EXIT_BOUND)
        assert code == 2, (code, run.log())
        lines = run.log().splitlines()
        assert len(lines) == 1 and lines[0].startswith("certctl run: "), lines
        assert flag in lines[0] and value in lines[0], lines[0]
    assert healthy.requests_by_certctl() == []
    assert healthy.snapshot() == before


@pytest.mark.parametrize("flag", ["--health-addr", "--metrics-addr"])
def test_address_in_use(healthy, flag):
    """An address that cannot be bound is exit 2 (docs/exit-codes.md), naming the flag."""
    before = healthy.snapshot()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with healthy.run_process(*TARGET, flags={flag: address}) as run:
            code = run.exit_code(RUN_EXIT_BOUND)
            assert code == 2, (code, run.log())
            lines = run.log().splitlines()
            assert len(lines) == 1 and lines[0].startswith("certctl run: "), lines
            assert flag in lines[0] and address in lines[0], lines[0]
    assert healthy.writes() == []
    assert healthy.snapshot() == before


# --- IP addresses and DNS names -------------------------------------------------------------

NAMES = {
    "check-ipv4-octet-256": ("check", "--ip", "10.0.0.256"),
    "job-ipv6-bad-digit": ("job", "--ip", "::g"),
    "run-ipv4-three-parts": ("run", "--ip", "1.2.3"),
    "check-idn-raw-utf8": ("check", "--dns-name", "bücher.example"),
    "job-idn-raw-utf8": ("job", "--dns-name", "münchen.hook.example"),
    "run-idn-raw-utf8": ("run", "--dns-name", "bücher.example"),
    "job-empty-label": ("job", "--dns-name", "a..b"),
    "check-wildcard-not-first": ("check", "--dns-name", "*.*.hook.example"),
}


@pytest.mark.parametrize("case", list(NAMES))
def test_malformed_name_flag(healthy, case):
    command, flag, value = NAMES[case]
    before = healthy.snapshot()
    assert_usage_error(healthy, before, command, [*TARGET, flag, value], flag, value)


# --- validities against --renew-before ----------------------------------------------------

VALIDITIES = {
    "job-cert-validity-equal": ("job", ["--cert-validity", "1y", "--renew-before", "1y"],
                                ["--cert-validity", "--renew-before"]),
    "run-ca-validity-below-default": ("run", ["--ca-validity", "20d"], ["--ca-validity"]),
}


@pytest.mark.parametrize("case", list(VALIDITIES))
def test_validity_not_longer_than_renew_before(healthy, case):
    command, args, named = VALIDITIES[case]
    before = healthy.snapshot()
    assert_usage_error(healthy, before, command, [*TARGET, *args], *named)


# --- the Lease's times against one another ------------------------------------------------

# Each names both flags and both values; certctl's defaults are 15s, 10s and 2s.
LEASE_TIMES = {
    "run-lease-duration-below-default-deadline": (
        ["--leader-elect", "--lease-duration", "5s"],
        ["--lease-renew-deadline", "10s", "--lease-duration", "5s"]),
    "run-lease-renew-deadline-equal-to-duration": (
        ["--leader-elect", "--lease-duration", "20s", "--lease-renew-deadline", "20s"],
        ["--lease-renew-deadline", "--lease-duration", "20s"]),
    "run-lease-retry-period-too-long-for-deadline": (
        ["--leader-elect", "--lease-retry-period", "9s"],
        ["--lease-renew-deadline", "10s", "--lease-retry-period", "9s", "1.2 times"]),
    "run-lease-retry-period-zero": (["--lease-retry-period", "0s"], ["--lease-retry-period"]),
}


@pytest.mark.parametrize("case", list(LEASE_TIMES))
def test_lease_times_out_of_order(healthy, case):
    args, named = LEASE_TIMES[case]
    before = healthy.snapshot()
    assert_usage_error(healthy, before, "run", [*TARGET, *args], *named)


# --- object names -------------------------------------------------------------------------

SUBDOMAIN_RULE = "DNS-1123 subdomain"
LONG_NAME = "a" * 254

# (command, args, flag, what the line must name besides the flag)
OBJECT_NAMES = {
    "run-lease-name-upper-case-and-underscore": (
        "run", ["--leader-elect", "--lease-name", "Bad_Name"], "--lease-name",
        ['"Bad_Name"', "Lease", SUBDOMAIN_RULE]),
    "run-lease-name-without-leader-elect": (
        "run", ["--lease-name", "bad_name"], "--lease-name", ['"bad_name"', "Lease"]),
    "run-lease-name-too-long": (
        "run", ["--leader-elect", "--lease-name", LONG_NAME], "--lease-name",
        ["254 characters long", "at most 253"]),
    "run-default-lease-name-too-long": (
        "run", ["--leader-elect", "--secret", "a" * 250], "--lease-name",
        ["default Lease name", "-certctl", "258 characters long"]),
    "check-secret-with-a-slash": (
        "check", ["--secret", "x/../../configmaps/y"], "--secret", ["Secret", "'/'"]),
    "job-secret-upper-case": ("job", ["--secret", "Webhook-Cert"], "--secret",
                              ['"Webhook-Cert"', "Secret"]),
    "rotate-secret-ending-in-a-dot": ("rotate", ["--secret", "cert."], "--secret",
                                      ['"cert."', "Secret"]),
    "run-secret-underscore": ("run", ["--secret", "webhook_cert"], "--secret",
                              ['"webhook_cert"', "Secret"]),
    "job-validating-webhook-starting-with-a-dash": (
        "job", ["--validating-webhook", "-hook"], "--validating-webhook",
        ["ValidatingWebhookConfiguration"]),
    "check-mutating-webhook-upper-case": (
        "check", ["--mutating-webhook", "Hook"], "--mutating-webhook",
        ['"Hook"', "MutatingWebhookConfiguration"]),
    "run-crd-empty-part": ("run", ["--crd", "widgets..example.com"], "--crd",
                           ['"widgets..example.com"', "CustomResourceDefinition"]),
    "job-apiservice-empty": ("job", ["--apiservice", ""], "--apiservice",
                             ['""', "APIService", "empty"]),
}


@pytest.mark.parametrize("case", list(OBJECT_NAMES))
def test_malformed_object_name(healthy, case):
    """A name the API server would refuse is a usage error naming the flag and the rule,
    not a controller that never finds (or never leads with) its object."""
    command, args, flag, named = OBJECT_NAMES[case]
    before = healthy.snapshot()
    assert_usage_error(healthy, before, command, [*TARGET, *args], flag, *named)


def test_malformed_namespace(healthy):
    before = healthy.snapshot()
    with healthy.run_process(*TARGET, flags={"-n": "Infra"}) as run:
        code = run.exit_code(RUN_EXIT_BOUND)
        assert code == 2, (code, run.log())
        lines = run.log().splitlines()
        assert len(lines) == 1 and lines[0].startswith("certctl run: "), lines
        assert "--namespace" in lines[0] and '"Infra"' in lines[0], lines[0]
    assert healthy.requests_by_certctl() == []
    assert healthy.snapshot() == before
