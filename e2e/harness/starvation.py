"""Clients that try to starve an HTTP port, and a kubelet-like probe that must get through
(tests/certctl/test_probe_starvation.py, bench/probe_bench.py).

`Attack` holds connections from one address (127.0.0.1, or `source`: the prober's own, as a
neighbour on the node would) in a thread of its own: slowloris connections send a header
line every 3 s, slow ones a request one byte every 0.5 s, idle ones nothing; a connection
the server closes is opened again at once; `AttackProcess` runs one in a process of its own.
`probe()` is one GET from another address (127.0.0.2: all of 127/8 is loopback on Linux)
under the kubelet's default 1 s timeout.
"""

import http.client
import json
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
import time

__all__ = ["ATTACKER", "PROBER", "KUBELET_TIMEOUT", "Attack", "AttackProcess", "probe",
           "raise_fd_limit"]

ATTACKER = "127.0.0.1"
PROBER = "127.0.0.2"
KUBELET_TIMEOUT = 1.0      # the kubelet's default timeoutSeconds
SLOWLORIS_GAP = 3.0
SLOW_GAP = 0.5
SLOW_REQUEST = b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"


def raise_fd_limit():
    """Soft RLIMIT_NOFILE up to the hard limit; returns the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class _Held:
    def __init__(self, kind, port, source=ATTACKER):
        self.kind, self.source = kind, source
        self.sent = 0
        self.next_send = time.monotonic()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((source, 0))
        self.sock.setblocking(False)
        self.sock.connect_ex(("127.0.0.1", port))

    def payload(self):
        """The next bytes to send and the gap after them (None: nothing, ever)."""
        if self.kind == "slowloris":
            line = b"GET /healthz HTTP/1.1\r\n" if self.sent == 0 else b"X-Wait: %d\r\n" % self.sent
            return line, SLOWLORIS_GAP
        if self.kind == "slow":
            at = self.sent % len(SLOW_REQUEST)
            return SLOW_REQUEST[at:at + 1], SLOW_GAP
        return None, None


class Attack:
    """A context manager: the connections are opened on entry and closed on exit."""

    def __init__(self, port, slowloris=0, slow=0, idle=0, source=ATTACKER):
        self.port, self.source = port, source
        self.counts = {"slowloris": slowloris, "slow": slow, "idle": idle}
        self.held = []
        self.reopened = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        for kind, count in self.counts.items():
            self.held += [_Held(kind, self.port, self.source) for _ in range(count)]
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stopping.set()
        self._thread.join(10)
        for held in self.held:
            held.sock.close()

    def _run(self):
        while not self._stopping.is_set():
            now = time.monotonic()
            for held in self.held:
                payload, gap = held.payload()
                if payload is None or held.next_send > now:
                    continue
                try:
                    held.sock.send(payload)
                    held.sent += 1
                    held.next_send = now + gap
                except OSError:
                    pass  # not connected yet, or closed: reopened below
            # poll, not select: the descriptors go past FD_SETSIZE.
            poller = select.poll()
            index = {}
            for i, held in enumerate(self.held):
                poller.register(held.sock, select.POLLIN)
                index[held.sock.fileno()] = i
            for fd, _ in poller.poll(50):
                i = index[fd]
                try:
                    if self.held[i].sock.recv(65536):
                        continue
                except BlockingIOError:
                    continue
                except OSError:
                    pass
                self.held[i].sock.close()
                self.held[i] = _Held(self.held[i].kind, self.port, self.source)
                self.reopened += 1


def probe(port, path, timeout=KUBELET_TIMEOUT):
    """(status, body, seconds) of one GET from PROBER on a new connection, as the kubelet
    sends it; (None, error, seconds) when it fails or times out."""
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout,
                                      source_address=(PROBER, 0))
    try:
        conn.request("GET", path, headers={"User-Agent": "kube-probe/1.29",
                                           "Connection": "close"})
        resp = conn.getresponse()
        body = resp.read().decode(errors="replace")
        return resp.status, body, time.monotonic() - started
    except OSError as e:
        return None, f"{type(e).__name__}: {e}", time.monotonic() - started
    finally:
        conn.close()


class AttackProcess:
    """An Attack in a process of its own, as a neighbour on the node is: the prober's own
    interpreter never waits for the attacker's thread between a probe's connect and its
    request. `reopened` is known once the context is left."""

    def __init__(self, port, slowloris=0, slow=0, idle=0, source=ATTACKER):
        self.args = {"port": port, "slowloris": slowloris, "slow": slow, "idle": idle,
                     "source": source}
        self.reopened = None
        self._proc = None

    def __enter__(self):
        self._proc = subprocess.Popen([sys.executable, __file__, json.dumps(self.args)],
                                      stdout=subprocess.PIPE, text=True)
        if self._proc.stdout.readline().strip() != "attacking":
            raise RuntimeError("the attack process did not start")
        return self

    def __exit__(self, *exc):
        self._proc.send_signal(signal.SIGTERM)
        out, _ = self._proc.communicate(timeout=20)
        self.reopened = json.loads(out.strip().splitlines()[-1])["reopened"]


def _attack_until_terminated(args):
    raise_fd_limit()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with Attack(**args) as attack:
        print("attacking", flush=True)
        stop.wait()
        reopened = attack.reopened
    print(json.dumps({"reopened": reopened}), flush=True)


if __name__ == "__main__":
    _attack_until_terminated(json.loads(sys.argv[1]))
