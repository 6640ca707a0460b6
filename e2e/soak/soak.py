#!/usr/bin/python3
"""The lifecycle soak (e2e/soak/README.md):

    e2e/soak/soak.py [--certctl build/ci/certctl] [--seed N] [--minutes M | --quick]
                     [--backend emulator|real|node] [--control NAME] [--report FILE.md]
                     [--json FILE.json]

--backend real runs the life on a real kube-apiserver and etcd (scripts/kube-up.sh), which
makes the admission calls; --backend node on a real node too (scripts/kube-up.sh --node, as
root): the kubelet and containerd run the chart's pods and Jobs from the images kube-up.sh
loads. Exit 0 when no admission call failed that no event declared and no event's other
check failed (a write budget), 1 otherwise, 2 when the soak itself could not run (the report
says which event it was at). --control runs certctl without one safety: it needs a control
build (scripts/build.sh control), given with --certctl build/control/certctl.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, E2E)

from harness.faults import logged_at, successful_writes  # noqa: E402
from soak.cluster import NS, SoakError  # noqa: E402
from soak.life import CONTROLS, Soak  # noqa: E402

REPO = os.path.dirname(E2E)


def certctl_writes(cluster, offset):
    """(monotonic time, verb resource/name) of every successful write by a certctl service
    account (the hook Jobs' and the sidecars'), Events and Leases left out."""
    out = []
    for entry in cluster.request_log()["requests"]:
        if not entry["user"].startswith(f"system:serviceaccount:{NS}:"):
            continue
        for verb, resource, name, _ in successful_writes([entry]):
            if resource != "leases":  # leader election: not a write in certctl's sense
                out.append((logged_at(entry) - offset, f"{verb} {resource}/{name}"))
    return out


def judge_writes(event):
    """A write budget the event declared, exceeded, fails the run."""
    if event.write_budget is None:
        return
    write, limit, why = event.write_budget
    count = event.writes.count(write)
    event.notes.append(f"{count} of at most {limit} `{write}` by certctl")
    if count > limit:
        event.violations.append(f"certctl wrote `{write}` {count} times, more than the {limit} "
                                f"that {why} allows")


def certctl_version(binary):
    try:
        out = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=10)
    except OSError as e:
        return f"{binary}: {e}"
    return f"{binary}: {out.stdout.strip().splitlines()[0] if out.stdout.strip() else '?'}"


def machine():
    cpus = os.cpu_count()
    with open("/proc/meminfo", encoding="ascii") as f:
        mem = int(f.readline().split()[1]) // 1024 // 1024
    return f"{platform.system()} {platform.release()}, {cpus} CPUs, {mem} GiB"


def _tally(writes):
    counts = {}
    for write in writes:
        counts[write] = counts.get(write, 0) + 1
    return ", ".join(f"{w} x{n}" if n > 1 else w for w, n in counts.items())


def judge_metrics(soak):
    """On a real API server: its own count of failed webhook calls must be the soak's (every
    failed call it counted is one the soak's books hold, and no other)."""
    counted = soak.caller.metrics()
    for name in sorted(set(counted) | set(soak.caller.failed)):
        calls, failed = counted.get(name, (0, 0))
        soak.metrics_notes.append(f"{name}: {calls} calls, {failed} failed")
        if failed != soak.caller.failed[name]:
            soak.ledger.run_violations.append(
                f"kube-apiserver's apiserver_admission_webhook_rejection_count has {failed} "
                f"failed calls of {name}, the soak's books {soak.caller.failed[name]}")


API_SERVERS = {
    "emulator": "the emulator; the soak made the admission calls",
    "real": "a real kube-apiserver and etcd (scripts/kube-up.sh), which made the admission "
            "calls",
    "node": "a real kube-apiserver and etcd, which made the admission calls, and a real node "
            "(scripts/kube-up.sh --node): the kubelet and containerd ran the pods and Jobs",
}


def report(soak, args, error, elapsed):
    ledger = soak.ledger
    undeclared = ledger.undeclared()
    form = "--quick" if args.quick else f"--minutes {args.minutes:g}"
    lines = [f"# Soak: --seed {args.seed} {form}"
             f"{'' if soak.backend == 'emulator' else ' --backend ' + soak.backend}"
             f"{' --control ' + args.control if args.control else ''}", "",
             f"- when: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
             f"machine: {machine()}; took {elapsed:.0f} s",
             f"- certctl: {certctl_version(args.certctl)}",
             f"- lifetimes: server certificate {soak.cert_validity} s, CA {soak.ca_validity} s, "
             f"--renew-before {soak.renew_before} s, --ca-overlap {soak.ca_overlap} s; "
             f"Lease {'/'.join(map(str, soak.lease_times or (15, 10, 2)))} s "
             f"(duration/renew deadline/retry)",
             f"- API server: {API_SERVERS[soak.backend]}",
             f"- admission calls: {ledger.calls + len(ledger.failures)} made, "
             f"{len(ledger.failures)} failed, of which **{len(undeclared)} undeclared**",
             f"- other failures of the run: **{len(ledger.violations())}**",
             f"- certctl's writes (Secret and targets): {len(soak.writes_of_certctl)}"]
    if soak.metrics_notes:
        lines.append("- kube-apiserver's own count (apiserver_admission_webhook_request_total, "
                     "_rejection_count): " + "; ".join(soak.metrics_notes))
    if args.control:
        lines.append(f"- control: {CONTROLS[args.control]}")
    if error:
        lines += ["", f"**The soak stopped: {error}**"]
    lines += ["", "| # | event | at s | calls | failed (declared) | certctl writes | repair s "
              "| notes |", "|---|---|---|---|---|---|---|---|"]
    for i, event in enumerate(ledger.events, 1):
        failed = len(event.failures)
        declared = failed - len(event.undeclared)
        repair = event.repair_seconds()
        lines.append(
            f"| {i} | {event.name} | {ledger.at(event.started):.1f} | {event.calls} | "
            f"{failed} ({declared}) | {len(event.writes)} | "
            f"{'not repaired' if repair is None else f'{repair:.1f}'} | "
            f"{'; '.join(event.notes)} |")
    written = [(event, _tally(event.writes)) for event in ledger.events if event.writes]
    if written:
        lines += ["", "certctl's writes while each event was under way:", ""]
        lines += [f"- {event.name}: {tally}" for event, tally in written]
    causes = {}
    for call, names, declared in ledger.failures:
        key = (call.cause, ", ".join(names) or "between events", declared)
        causes[key] = causes.get(key, 0) + 1
    if causes:
        lines += ["", "Failed calls by cause:", "",
                  "| cause | under way | declared | calls |", "|---|---|---|---|"]
        for (cause, names, declared), count in sorted(causes.items()):
            reason = ""
            if declared:
                for event in ledger.events:
                    if event.name in names.split(", ") and cause in event.allowed:
                        reason = f": {event.allowed[cause]}"
            lines.append(f"| {cause} | {names} | {'yes' + reason if declared else '**no**'} "
                         f"| {count} |")
    if ledger.violations():
        lines += ["", "Other failures of the run:", ""]
        lines += [f"- {name}: {text}" for name, text in ledger.violations()]
    if undeclared:
        lines += ["", "First undeclared failures:", ""]
        lines += [f"- {ledger.at(call.at):.2f}s [{', '.join(names) or 'between events'}] "
                  f"{call.describe()}" for call, names in undeclared[:15]]
    lines += ["", "Peak RSS (VmHWM), KiB:", "", "| process | KiB |", "|---|---|"]
    lines += [f"| {name} | {kib} |" for name, kib in sorted(soak.rss.items())]
    errors = (soak.pods.errors if soak.pods else [])
    if errors:
        lines += ["", "Harness errors:", ""] + [f"- {e}" for e in errors[:10]]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--certctl", default=os.path.join(REPO, "build", "ci", "certctl"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true",
                        help="--minutes 1: every lifetime at its floor (about two minutes)")
    parser.add_argument("--backend", choices=sorted(API_SERVERS), default="emulator",
                        help="the API server: the project's emulator, a real kube-apiserver "
                             "and etcd built and started by scripts/kube-up.sh, or those and "
                             "a real node that runs the pods (root)")
    parser.add_argument("--control", choices=sorted(CONTROLS))
    parser.add_argument("--report", help="write the report (Markdown) here too")
    parser.add_argument("--json", help="write the figures as JSON here")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work folder (a failed run always keeps it)")
    args = parser.parse_args(argv)
    if args.backend == "node" and args.control:
        parser.error("--control needs --backend emulator or real: the node's pods run the "
                     "image of this tree (localhost/certctl:dev), never a control build")
    if args.backend == "node" and os.geteuid() != 0:
        parser.error("--backend node needs root (scripts/kube-up.sh --node)")
    if args.quick:
        args.minutes = 1.0
    # SIGTERM (a CI timeout, kill) ends the run like Ctrl-C: every process it started stops.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    workdir = tempfile.mkdtemp(prefix="certctl-soak-")
    soak = Soak(args.certctl, workdir, args.seed, args.minutes, control=args.control,
                log=lambda text: print(text, flush=True), backend=args.backend)
    started = time.monotonic()
    offset = time.time() - time.monotonic()
    error = None
    try:
        soak.run()
    except (SoakError, RuntimeError, AssertionError, OSError) as e:
        error = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    finally:
        try:
            if soak.cluster_up():
                if soak.real_api and soak.caller is not None:
                    soak.caller.stop()  # every call answered before the metrics are read
                    judge_metrics(soak)
                soak.writes_of_certctl = certctl_writes(soak.cluster, offset)
                for event in soak.ledger.events:
                    end = event.repaired or time.monotonic()
                    event.writes = [w for t, w in soak.writes_of_certctl
                                    if event.started <= t <= end]
                    judge_writes(event)
        finally:
            soak.close()
    text = report(soak, args, error, time.monotonic() - started)
    print(text)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"seed": args.seed, "minutes": args.minutes, "control": args.control,
                       "backend": args.backend,
                       "calls": soak.ledger.calls + len(soak.ledger.failures),
                       "failed": len(soak.ledger.failures),
                       "undeclared": len(soak.ledger.undeclared()),
                       "violations": soak.ledger.violations(), "error": error,
                       "events": [{"name": e.name, "failed": len(e.failures),
                                   "undeclared": len(e.undeclared),
                                   "repair": e.repair_seconds()}
                                  for e in soak.ledger.events]}, f, indent=1)
    failed = bool(error or soak.ledger.undeclared() or soak.ledger.violations())
    if args.keep or failed:  # a failed run keeps every process's log
        print(f"work folder (the logs of every pod, Job and the API server): {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    if error:
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
