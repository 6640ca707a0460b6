#!/usr/bin/python3
"""`certctl controller` at the scale of a fleet, beside cert-manager's cainjector, each on a
real kube-apiserver of its own (bench/fleet/README.md says what each row measures).

    bench/fleet/run.py [--certctl build/ci/certctl] [--columns certctl,certctl-cm,cainjector]
                       [--quick] [--steady SECONDS] [--namespaces N] [--services N]
                       [--configurations N] [--other-services N] [--other-secrets N]
                       [--other-configurations N] [--drift N] [--report FILE.md] [--json FILE]

Columns (bench/fleet/tools.py): `certctl` issues a Secret for each annotated Service and
injects its CA into each annotated configuration; `certctl-cm` is certctl with
--cert-manager-annotations on cainjector's bed; `cainjector` is cert-manager's CA injector
(bench/fleet/cainjector, built from the Go module proxy on first use) injecting from CA
Secrets the driver created. For each: a fresh control plane, the fleet (bench/fleet/bed.py),
then start (to all issued and injected), steady (a window of nothing happening), drift
(caBundles wiped at once) and restart (SIGKILL, a new process, to all verified).

Exit 0 when every column ran every step, 1 when one failed (the report says which), 2 on
bad arguments.
"""

import argparse
import collections
import concurrent.futures
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bed  # noqa: E402
import tools  # noqa: E402  (puts e2e/ and bench/peers/ on the path)
from harness.fleet import CONTROLLER_RULES  # noqa: E402
from harness.real_cluster import RealCluster  # noqa: E402
from measure import cpu_seconds  # noqa: E402

WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
POLL = 0.1
MIB = 1024.0
TARGET_START_S = 30.0      # the issue's targets for certctl
TARGET_RSS_MIB = 32.0


class StepFailed(RuntimeError):
    pass


class Form:
    """Windows and bounds: the full run's, or --quick's."""

    def __init__(self, quick, steady=None):
        self.quick = quick
        self.steady = (3.0 if quick else 300.0) if steady is None else steady
        self.quiet = 1.0 if quick else 5.0          # seconds without a request: the tool is done
        self.quiet_bound = 10.0 if quick else 300.0
        self.bound = 60.0 if quick else 900.0       # what any wait may take


def proc_status(pid):
    """VmRSS and VmHWM of a live process, in KiB."""
    found = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                    found[key] = int(line.split()[1])
    except OSError:
        pass
    return found


def requests_of(cluster, user):
    """The user's requests since the request log's last reset: totals, by verb, and by verb
    and resource."""
    entries = [e for e in cluster.request_log()["requests"] if e["user"] == user]
    writes = [e for e in entries if e["verb"] in WRITE_VERBS and e["code"] < 300]
    # Requests answered in each second from the first (the audit log's stageTimestamp).
    seconds = [datetime.datetime.fromisoformat(e["time"].rstrip("Z")).timestamp()
               for e in entries if e.get("time", "").rstrip("Z")]
    timeline = collections.Counter(int(t - min(seconds)) for t in seconds)
    return {"requests": len(entries), "writes": len(writes),
            "per_second": [timeline.get(i, 0) for i in range(max(timeline, default=-1) + 1)],
            "event_writes": sum(e["resource"] == "events" for e in writes),
            "watches": sum(e["verb"] == "watch" for e in entries),
            "by_verb": dict(collections.Counter(e["verb"] for e in entries)),
            "by_resource": dict(collections.Counter(
                f"{e['verb']} {e['resource']}" + (f"/{e['subresource']}" if e["subresource"]
                                                  else "") for e in entries))}


def until_quiet(cluster, user, form, began):
    """Waits until the user made no request for form.quiet seconds (bounded): the seconds
    from `began` to when its last request was seen (within 0.25 s), None if never quiet."""
    start = time.monotonic()
    count, since = -1, start
    while time.monotonic() - start < form.quiet_bound:
        now_count = sum(e["user"] == user for e in cluster.request_log()["requests"])
        if now_count != count:
            count, since = now_count, time.monotonic()
        elif time.monotonic() - since >= form.quiet:
            return since - began
        time.sleep(0.25)
    return None


def check_alive(tool, what):
    if not tool.alive():
        raise StepFailed(f"{what}: {tool.name} exited:\n{tool.log()[-2000:]}")


# --- the steps -----------------------------------------------------------------------------

def start(ctx):
    """From the process's start to every Secret issued and every caBundle holding its CA."""
    cluster, tool, tracker, plan, form, fig = ctx.unpack()
    cluster.reset_request_log()
    ctx.watches_before = bed.open_watches(cluster)
    secrets = len(plan.secrets)
    configs = len(plan.configurations)
    began = time.monotonic()
    tool.start()
    done = tracker.wait(lambda: tracker.all_in(secrets, configs) or not tool.alive(),
                        form.bound)
    check_alive(tool, "start")
    fig["start_cpu_s"] = cpu_seconds(tool.pid)
    issued, injected = tracker.counts()
    if not done:
        raise StepFailed(f"start: after {form.bound:g}s {issued} of {secrets} Secrets, "
                         f"{injected} of {configs} configurations\n{tool.log()[-2000:]}")
    if tool.issues:
        fig["issued_s"] = tracker.last_issued() - began
    fig["injected_s"] = tracker.last_injected() - began
    fig["start_verified"] = bed.verify(cluster, plan, ctx.secret_selector, tool.issues)
    fig["start_quiet_s"] = until_quiet(cluster, tool.user, form, began)
    fig["start_requests"] = requests_of(cluster, tool.user)
    fig["start_hwm_kib"] = proc_status(tool.pid).get("VmHWM")
    ctx.say(f"{tool.name}: all {configs} configurations injected in {fig['injected_s']:.2f}s"
            + (f", {secrets} Secrets issued in {fig['issued_s']:.2f}s" if tool.issues else "")
            + f"; {fig['start_requests']['requests']} requests")


def steady(ctx):
    """A window in which nothing changes: memory, CPU, requests, watches."""
    cluster, tool, tracker, plan, form, fig = ctx.unpack()
    cluster.reset_request_log()
    modified = tracker.modified()
    cpu = cpu_seconds(tool.pid)
    began = time.monotonic()
    rss = []
    while time.monotonic() - began < form.steady:
        time.sleep(min(5.0, max(0.0, form.steady - (time.monotonic() - began))))
        check_alive(tool, "steady")
        rss.append(proc_status(tool.pid).get("VmRSS"))
    fig["steady_cpu_s"] = cpu_seconds(tool.pid) - cpu
    status = proc_status(tool.pid)
    fig["steady_rss_kib"] = status.get("VmRSS")
    fig["steady_rss_max_kib"] = max([r for r in rss if r] or [0])
    fig["steady_anon_kib"] = status.get("RssAnon")
    fig["peak_rss_kib"] = status.get("VmHWM")
    fig["steady_requests"] = requests_of(cluster, tool.user)
    fig["steady_open_watches"] = bed.open_watches(cluster) - ctx.watches_before
    fig["steady_objects_changed"] = sum((tracker.modified() - modified).values())
    ctx.say(f"{tool.name}: steady {form.steady:g}s: RSS {fig['steady_rss_kib'] / MIB:.1f} MiB, "
            f"CPU {fig['steady_cpu_s']:.2f}s, {fig['steady_requests']['requests']} requests, "
            f"{fig['steady_requests']['writes']} writes")


def drift(ctx):
    """caBundles of `drift` configurations wiped at once: to all of them repaired."""
    cluster, tool, tracker, plan, form, fig = ctx.unpack()
    victims = plan.configuration_keys()[:plan.sizes.drift]
    tracker.arm(victims)
    cluster.reset_request_log()
    patch = [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": ""}]

    def wipe(key):
        resp = cluster.api("PATCH", f"{bed.ADMISSION}/{key}", patch,
                           content_type="application/json-patch+json")
        if resp.status != 200:
            raise StepFailed(f"drift: wiping {key}: {resp.status} {resp.body[:300]!r}")

    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(min(16, len(victims))) as pool:
        list(pool.map(wipe, victims))
    fig["drift_sent_s"] = time.monotonic() - began
    done = tracker.wait(lambda: tracker.all_repaired() or not tool.alive(), form.bound)
    check_alive(tool, "drift")
    repaired, times = tracker.repaired()
    if not done:
        raise StepFailed(f"drift: {repaired} of {len(victims)} repaired after {form.bound:g}s"
                         f"\n{tool.log()[-2000:]}")
    fig["drift_n"] = len(victims)
    fig["drift_s"] = max(times) - began
    fig["drift_median_s"] = statistics.median(times) - began
    fig["drift_quiet_s"] = until_quiet(cluster, tool.user, form, began)
    fig["drift_requests"] = requests_of(cluster, tool.user)
    ctx.say(f"{tool.name}: {len(victims)} wiped caBundles repaired in {fig['drift_s']:.2f}s")


def restart(ctx):
    """SIGKILL, a new process: to every object gone through once (the tool's own metrics),
    nothing having changed meanwhile."""
    cluster, tool, tracker, plan, form, fig = ctx.unpack()
    tool.kill()
    cluster.reset_request_log()
    modified = tracker.modified()
    began = time.monotonic()
    tool.start()
    ready_s = verified_s = None
    while time.monotonic() - began < form.bound:
        check_alive(tool, "restart")
        if tool.has_readiness and ready_s is None and tool.ready():
            ready_s = time.monotonic() - began
        if tool.verified(tool.metrics(), plan):
            verified_s = time.monotonic() - began
            break
        time.sleep(POLL)
    if verified_s is None:
        raise StepFailed(f"restart: not verified within {form.bound:g}s\n{tool.log()[-2000:]}")
    fig["restart_ready_s"], fig["restart_s"] = ready_s, verified_s
    fig["restart_verified"] = bed.verify(cluster, plan, ctx.secret_selector, tool.issues)
    fig["restart_quiet_s"] = until_quiet(cluster, tool.user, form, began)
    fig["restart_requests"] = requests_of(cluster, tool.user)
    fig["restart_objects_changed"] = sum((tracker.modified() - modified).values())
    ctx.say(f"{tool.name}: restart to all verified in {verified_s:.2f}s, "
            f"{fig['restart_requests']['requests']} requests, "
            f"{fig['restart_requests']['writes']} writes")


STEPS = [start, steady, drift, restart]


class Context:
    def __init__(self, cluster, tool, tracker, plan, form, figures, say, secret_selector):
        self.cluster, self.tool, self.tracker = cluster, tool, tracker
        self.plan, self.form, self.figures, self.say = plan, form, figures, say
        self.secret_selector = secret_selector
        self.watches_before = 0

    def unpack(self):
        return self.cluster, self.tool, self.tracker, self.plan, self.form, self.figures


def on_fresh_bed(kind, binary, plan, pairs, bystander_ca, form, workdir, say, certctl_args):
    """Every step for one column on a control plane of its own."""
    figures = {}
    cluster = RealCluster()
    cluster.start()
    tracker = tool = None
    try:
        figures["apiserver"] = cluster.api("GET", "/version").json().get("gitVersion")
        cluster.add_user(kind.account, CONTROLLER_RULES)
        objects = bed.fleet_objects(plan, kind.style,
                                    pairs if kind.style == "cert-manager" else None,
                                    bystander_ca)
        began = time.monotonic()
        bed.create(cluster, plan, objects)
        figures["objects"] = len(objects) + len(plan.namespaces)
        figures["setup_s"] = time.monotonic() - began
        say(f"{kind.name}: {figures['objects']} objects created in {figures['setup_s']:.1f}s")
        selector = bed.ISSUED_LABEL if kind.issues else f"{bed.FLEET_LABEL}=source"
        tracker = bed.Tracker(cluster, plan, selector).start()
        tool = kind(cluster, workdir, binary, certctl_args) if issubclass(kind, tools.Certctl) \
            else kind(cluster, workdir, binary)
        figures["version"] = tool.version
        figures["args"] = getattr(tool, "extra", []) + getattr(tool, "given", [])
        ctx = Context(cluster, tool, tracker, plan, form, figures, say, selector)
        try:
            for step in STEPS:
                step(ctx)
        except StepFailed as e:
            figures["failed"] = str(e)
    finally:
        if tool is not None:
            tool.stop()
        if tracker is not None:
            tracker.stop()
        cluster.stop()
    return figures


# --- the report ------------------------------------------------------------------------------

def rows(form, sizes):
    """(title, key, how to show it, whether a ratio means anything)."""
    return [
        (f"start: all {sizes.services} Secrets issued", "issued_s", "s", True),
        (f"start: all {sizes.configurations} caBundles injected", "injected_s", "s", True),
        ("start: CPU seconds until then", "start_cpu_s", "s", True),
        (f"start: to its last request (then none for {form.quiet:g} s)", "start_quiet_s", "s",
         True),
        ("start: API requests until quiet", "start_requests.requests", "n", True),
        ("start: by verb", "start_requests.by_verb", "verbs", False),
        ("start: watches opened", "start_requests.watches", "n", True),
        ("start: read back, caBundle == the Secret's ca.crt", "start_verified.bytes_equal",
         "of_configurations", False),
        (f"steady: RSS at the end of {form.steady:g} s", "steady_rss_kib", "mib", True),
        ("steady: of which anonymous (RssAnon)", "steady_anon_kib", "mib", True),
        ("peak RSS since start (VmHWM)", "peak_rss_kib", "mib", True),
        (f"steady: CPU seconds over {form.steady:g} s", "steady_cpu_s", "s", True),
        ("steady: API requests", "steady_requests.requests", "n", True),
        ("steady: by verb", "steady_requests.by_verb", "verbs", False),
        ("steady: writes", "steady_requests.writes", "n", False),
        ("steady: watches open (kube-apiserver's count)", "steady_open_watches", "n", True),
        (f"drift: {sizes.drift} caBundles wiped at once, to all repaired", "drift_s", "s", True),
        ("drift: median repair", "drift_median_s", "s", True),
        ("drift: API requests", "drift_requests.requests", "n", True),
        ("drift: by verb", "drift_requests.by_verb", "verbs", False),
        ("restart: SIGKILL to /readyz 200", "restart_ready_s", "s", False),
        ("restart: SIGKILL to all verified", "restart_s", "s", True),
        ("restart: API requests", "restart_requests.requests", "n", True),
        ("restart: by verb", "restart_requests.by_verb", "verbs", False),
        ("restart: write requests (objects changed)", "restart_requests.writes", "writes",
         False),
        ("restart: read back, caBundle == the Secret's ca.crt",
         "restart_verified.bytes_equal", "of_configurations", False),
    ]


def lookup(figures, key):
    value = figures
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def cell(figures, key, how):
    if "not_run" in figures:
        return "not run"
    value = lookup(figures, key)
    if value is None:
        return "—"
    if how == "s":
        return f"{value:.2f} s"
    if how == "mib":
        return f"{value / MIB:.1f} MiB"
    if how == "verbs":
        return ", ".join(f"{verb} {n}" for verb, n in
                         sorted(value.items(), key=lambda item: (-item[1], item[0]))) or "none"
    if how == "of_configurations":
        verified = lookup(figures, key.split(".")[0])
        return f"{value} of {verified['configurations']}"
    if how == "writes":
        changed = figures.get("restart_objects_changed")
        return f"{value} ({changed})" if changed is not None else str(value)
    return str(value)


def ratio(ours, theirs):
    if not isinstance(ours, (int, float)) or not isinstance(theirs, (int, float)) or \
            isinstance(ours, bool) or theirs == 0:
        return ""
    return f"{ours / theirs:.2f}"


def report(results, kinds, sizes, form, elapsed, head=""):
    shown = [k for k in kinds if k.name in results]
    lines = ["# certctl controller beside cert-manager's cainjector", "",
             f"Tree at the start: {head or '?'} (certctl's version names the commit its build "
             "was configured at).", "",
             f"{datetime.date.today().isoformat()}, {platform.machine()}, {os.cpu_count()} CPUs, "
             f"{'quick' if form.quick else 'full'} run ({elapsed:.0f} s); load average at the "
             f"end {os.getloadavg()[0]:.2f}.", "",
             f"Fleet: {sizes.services} annotated Services and {sizes.configurations} annotated "
             f"configurations in {sizes.namespaces} namespaces, beside "
             f"{sizes.other_services} Services, {sizes.other_secrets} Secrets and "
             f"{sizes.other_configurations} configurations nobody annotated; steady window "
             f"{form.steady:g} s; drift on {sizes.drift} configurations.", ""]
    for kind in shown:
        args = " ".join(results[kind.name].get("args") or []) or "default flags"
        lines.append(f"- {kind.name}: {kind.title}, {results[kind.name].get('version', '?')}; "
                     f"{args}")
    servers = sorted({f.get("apiserver") for f in results.values() if f.get("apiserver")})
    lines += [f"- kube-apiserver and etcd of scripts/kube-up.sh: {', '.join(servers)}, a fresh "
              "one per column", ""]
    versus = [k for k in shown if k.name != "cainjector"] if "cainjector" in results and \
        "not_run" not in results["cainjector"] else []
    lines += ["| row | " + " | ".join(k.name for k in shown) + "".join(
        f" | {k.name} / cainjector" for k in versus) + " |",
        "|" + "---|" * (1 + len(shown) + len(versus))]
    for title, key, how, ratios in rows(form, sizes):
        line = f"| {title} | " + " | ".join(cell(results[k.name], key, how) for k in shown)
        for k in versus:
            line += " | " + (ratio(lookup(results[k.name], key),
                                   lookup(results["cainjector"], key)) if ratios else "")
        lines.append(line + " |")
    for name in ("certctl", "certctl-qps"):
        certctl = results.get(name)
        if certctl and "injected_s" in certctl:
            start_s = max(certctl.get("issued_s") or 0, certctl["injected_s"])
            rss = (certctl.get("steady_rss_kib") or 0) / MIB
            lines += ["", f"Targets, {name}: all issued and injected within "
                      f"{TARGET_START_S:g} s: {'met' if start_s <= TARGET_START_S else 'MISSED'}"
                      f" ({start_s:.1f} s); steady RSS < {TARGET_RSS_MIB:g} MiB: "
                      f"{'met' if rss < TARGET_RSS_MIB else 'MISSED'} ({rss:.1f} MiB)."]
    for kind in shown:
        figures = results[kind.name]
        details = [f"{phase}: " + ", ".join(f"{what} {n}" for what, n in sorted(
            figures[f"{phase}_requests"]["by_resource"].items(), key=lambda i: (-i[1], i[0])))
            for phase in ("start", "steady", "drift", "restart")
            if f"{phase}_requests" in figures]
        if details:
            lines += ["", f"{kind.title}, requests by verb and resource:", ""]
            lines += [f"- {d}" for d in details]
        if "failed" in figures:
            lines += ["", f"{kind.title} failed: {figures['failed']}"]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--certctl", default=os.path.join(tools.REPO, "build", "ci", "certctl"))
    parser.add_argument("--columns", default=",".join(tools.COLUMNS),
                        help="comma-separated, of: " + ", ".join(tools.COLUMNS))
    parser.add_argument("--quick", action="store_true", help="small counts, short windows")
    parser.add_argument("--steady", type=float, help="seconds of the steady window "
                        "(default 300, 3 with --quick)")
    for key in bed.Sizes.FULL:
        parser.add_argument(f"--{key.replace('_', '-')}", type=int, dest=key,
                            help=f"default {bed.Sizes.FULL[key]} "
                                 f"({bed.Sizes.QUICK[key]} with --quick)")
    parser.add_argument("--certctl-args", default="",
                        help="more flags for `certctl controller` in both certctl columns "
                             "(the report names them), e.g. \"--kube-api-qps 1000\"")
    parser.add_argument("--report", help="write the Markdown report here too")
    parser.add_argument("--json", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    columns = [c for c in args.columns.split(",") if c]
    unknown = [c for c in columns if c not in tools.COLUMNS]
    if unknown or not columns:
        parser.error(f"unknown columns {unknown}; known: {', '.join(tools.COLUMNS)}")
    try:
        sizes = bed.Sizes(args.quick, **{k: getattr(args, k) for k in bed.Sizes.FULL})
    except ValueError as e:
        parser.error(str(e))
    form = Form(args.quick, args.steady)
    if not os.access(args.certctl, os.X_OK):
        parser.error(f"no certctl at {args.certctl}")
    certctl = os.path.abspath(args.certctl)
    say = lambda text: print(f"fleet: {text}", file=sys.stderr, flush=True)  # noqa: E731
    binaries = {}
    for name in columns:
        binaries[name] = tools.cainjector_build() if name == "cainjector" else certctl
    plan = bed.Plan(sizes)
    head = subprocess.run(["git", "-C", tools.REPO, "log", "-1", "--format=%h %s"],
                          capture_output=True, text=True).stdout.strip()[:80]
    began = time.monotonic()
    cm = any(tools.COLUMNS[c].style == "cert-manager" for c in columns)
    # The CA Secrets of cainjector's bed (the same for both columns that use it), and the CA
    # the bystander configurations trust.
    pairs = bed.ca_pairs(plan) if cm else bed.ca_pairs(bed.Plan(bed.Sizes(
        True, namespaces=1, services=1, configurations=1)))
    bystander_ca = next(iter(pairs.values()))["ca.crt"]
    results = {}
    with tempfile.TemporaryDirectory(prefix="fleet-") as workdir:
        for name in columns:
            kind = tools.COLUMNS[name]
            try:
                results[name] = on_fresh_bed(kind, binaries[name], plan, pairs, bystander_ca,
                                             form, os.path.join(workdir, name), say,
                                             shlex.split(args.certctl_args))
            except Exception:  # noqa: BLE001 - the report says what broke
                results[name] = {"failed": traceback.format_exc()}
    kinds = [tools.COLUMNS[c] for c in columns]
    text = report(results, kinds, sizes, form, time.monotonic() - began, head)
    print(text)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"sizes": sizes.as_dict(), "steady_s": form.steady, "quick": form.quick,
                       "columns": results}, f, indent=1, sort_keys=True)
    return 1 if any("failed" in figures for figures in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
