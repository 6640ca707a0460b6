"""The life the soak's cluster goes through (see e2e/soak/README.md): `Soak.life()` lists the
events in order, each a method that disturbs the cluster and returns when the disturbance is
over; the ledger then waits for the cluster to be steady to measure the repair.
"""

import base64
import json
import math
import os
import subprocess
import time

from harness.faults import read_only_folder
from soak.apiserver import fingerprints
from soak.cluster import (ADMISSION, CERTCTL_USER, CHART, DEPLOYMENT, MWC, NS, PHASE, RELEASE,
                          RENAMED, SECRET, SERVICE, SETTLE_BOUND, UNTIL, VWC, WEBHOOK_PRE_STOP,
                          SoakCluster, SoakError, not_after)
from soak.ledger import Event
from soak.workloads import ENDPOINTS_LAG, template_hash_of

CONTROLS = {
    "two-ca-bundle": "a CA rotation replaces CA, server certificate and every caBundle at once "
                     "(no bundle holding both CAs before the server certificate moves)",
    "names": "the certificate's names are not checked: not against --service, not against "
             "what the targets call, not in the serving check's handshake (the API server's "
             "view)",
    "damping": "every repair of a caBundle another writer keeps changing goes at once",
}
FIGHT_INTERVAL = 0.2  # the other injector writes this often


class Soak(SoakCluster):
    def run_event(self, event, action):
        self.say(f"[{self.ledger.at(time.monotonic()):7.1f}s] {event.name}: {event.what}")
        self.ledger.begin(event)
        try:
            action(event)
        finally:
            self.ledger.finish(event)
        self.settle(event)

    def install_with_hooks(self, event):
        for obj in [self.webhook_service(), *self.targets()]:
            self.kubectl("apply", "-f", "-", input=json.dumps(obj))
        self.phase = "job"
        self.helm("install", RELEASE, CHART, "--namespace", NS, "--wait",
                  values=self.values("job"))
        self.volume_pod = self.new_volume_pod()
        self.legacy_routed = True
        self.volume_pod.wait_ready(SETTLE_BOUND)

    def controller_stopped(self, event):
        """Mode job: nothing renews between two upgrades. Wait until the server certificate
        is inside --renew-before, then `helm upgrade`: its pre-upgrade hook renews. As early
        inside as the clocks allow: the new certificate must still reach the webhook's Secret
        volume (the kubelet's next sync of the pod) before the old one ends."""
        _, files = self.secret_files()
        leaf_end = not_after(files["tls.crt"])
        resume = leaf_end - self.renew_before + min(2.0, self.renew_before / 4)
        event.notes.append(f"no controller for {resume - time.time():.0f}s more "
                           f"(--renew-before {self.renew_before}s)")
        time.sleep(max(0.0, resume - time.time()))
        before = files["tls.crt"]
        self.helm("upgrade", RELEASE, CHART, "--namespace", NS, "--wait",
                  values=self.values("job"))
        _, files = self.secret_files()
        if files["tls.crt"] == before:
            raise SoakError("the pre-upgrade hook did not renew the server certificate")

    def to_sidecar(self, event):
        self.phase = "sidecar"
        self.helm("upgrade", RELEASE, CHART, "--namespace", NS, values=self.values("sidecar"))
        self.wait(lambda: self.pods.ready_pods(), "the chart's pod ready")
        # The webhook's own Deployment is deleted once the chart's pods serve: its pod leaves
        # the endpoints (calls still on their way reach it for a moment) and pauses in preStop.
        self.legacy_routed = False
        self.legacy_routed_until = time.monotonic() + ENDPOINTS_LAG
        if self.backend != "node":  # on the node the pod's own preStop pauses it
            time.sleep(WEBHOOK_PRE_STOP)
        self.volume_pod.stop()

    def leaf_renewal(self, event):
        """Wait for the running controller to renew the server certificate by itself."""
        _, files = self.secret_files()
        before = files["tls.crt"]
        self.wait(lambda: self.secret_files()[1].get("tls.crt") != before,
                  "a renewal of the server certificate", bound=self.cert_validity * 1.5)

    def scale(self, replicas):
        def action(event):
            self.replicas = replicas
            self.kubectl("scale", "deployment", DEPLOYMENT, "-n", NS,
                         f"--replicas={replicas}")
            self.wait(lambda: len(self.pods.ready_pods()) == replicas and all(
                not p.terminating for p in self.pods.pods.values()), f"{replicas} ready pods")
            self.wait(lambda: self.leader() is not None, "a leader")
            event.notes.append(f"leader {self.leader().name}")
        return action

    def rotate_ca(self, event):
        """`certctl rotate --ca`, the leader SIGKILLed at every step of the rotation."""
        _, files = self.secret_files()
        old_ca = files["ca.crt"]
        proc = subprocess.run([self.binary, "rotate", "--ca", "-n", NS, "--secret", SECRET,
                               "--service", self.service, "--kubeconfig",
                               self.cluster.kubeconfig()],
                              capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, **self.certctl_env))
        if proc.returncode != 0:
            raise SoakError(f"certctl rotate --ca: {proc.stderr}")
        steps = []

        def step():
            secret, files = self.secret_files()
            phase = ((secret or {}).get("metadata", {}).get("annotations") or {}).get(PHASE, "")
            return phase or ("done" if files.get("ca.crt") != old_ca else "requested")

        seen = "requested"
        while True:
            self.wait(lambda: step() != seen, f"the rotation past {seen}",
                      bound=60 + 2 * self.ca_overlap)
            seen = step()
            steps.append(seen)
            if seen == "done":
                break
            leader = self.leader()
            if leader is not None:
                event.notes.append(f"{seen}: SIGKILL of the leader {leader.name}")
                self.pods.kill_sidecar(leader)
        event.notes.append("steps: " + " -> ".join(steps))

    def ca_expiry(self, event):
        """The CA comes within --renew-before of its end: certctl rotates it by itself. Done
        once the Secret trusts a single CA that it did not trust before (or, when that
        rotation began already, once it trusts only the CA the rotation brought)."""
        secret, files = self.secret_files()
        under_way = ((secret or {}).get("metadata", {}).get("annotations") or {}).get(PHASE)
        trusted = fingerprints(files["ca.crt"])
        before = set(trusted[1:] if under_way else trusted)
        if under_way:
            event.notes.append(f"the rotation began before the event ({under_way})")
        end = not_after(files["ca.crt"])  # the first CA of the bundle is the newest
        event.notes.append(f"the CA ends in {end - time.time():.0f}s")

        def replaced():
            now = fingerprints(self.secret_files()[1].get("ca.crt", ""))
            return len(now) == 1 and now[0] not in before

        self.wait(replaced, "the CA rotation by expiry",
                  bound=end - time.time() + self.ca_overlap + 60)

    def api_unavailable(self, event):
        """The API server refuses certctl's requests (503 on the emulator, 429 from a real
        kube-apiserver's flow control) for longer than a renewal interval (--cert-validity
        minus --renew-before), starting just after a renewal."""
        self.leaf_renewal(event)
        outage = self.cert_validity - self.renew_before + self.renew_before // 4
        status = self.certctl_unavailable(True)
        event.notes.append(f"{status} to {CERTCTL_USER} for {outage}s")
        time.sleep(outage)
        self.certctl_unavailable(False)

    def tamper(self, event):
        secret, _ = self.secret_files()
        choices = [(PHASE, "trusting"), (PHASE, "sideways"), (UNTIL, "9999-12-31T23:59:59Z")]
        key, value = self.random.choice(choices)
        event.notes.append(f"{key}={value}")
        self.kubectl("annotate", "secret", SECRET, "-n", NS, "--overwrite", f"{key}={value}")

    def fighting_writer(self, event):
        """Another injector writes its own CA into the validating webhook's caBundle five
        times a second for a minute (scaled); certctl's repairs are held to what its damping
        allows: three at once, then one after 1 s, 2 s, 4 s, ... (and three to spare)."""
        other = subprocess.run([self.binary, "generate", "--service", "other", "-n", NS,
                                "--out-dir", os.path.join(self.workdir, "other-ca")],
                               capture_output=True, text=True)
        if other.returncode != 0:
            raise SoakError(other.stderr)
        with open(os.path.join(self.workdir, "other-ca", "ca.crt"), "rb") as f:
            bundle = base64.b64encode(f.read()).decode()
        patch = json.dumps([{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle",
                             "value": bundle}])
        seconds = max(10, 60 * self.k)
        event.write_budget = (f"patch validatingwebhookconfigurations/{VWC}",
                              3 + math.ceil(math.log2(seconds)) + 3,
                              "certctl's damping: 3 repairs at once, then 1 s, 2 s, 4 s, ... apart")
        end = time.monotonic() + seconds
        writes = 0
        path = f"{ADMISSION}/validatingwebhookconfigurations/{VWC}?fieldManager=other-injector"
        while time.monotonic() < end:
            resp = self.cluster.api("PATCH", path, patch,
                                    content_type="application/json-patch+json")
            if resp.status != 200:
                raise SoakError(f"the other injector's write: {resp.status} {resp.body[:200]!r}")
            writes += 1
            time.sleep(FIGHT_INTERVAL)
        event.notes.append(f"{writes} writes by other-injector in {seconds:.0f}s")

    def folder_read_only(self, event):
        """One pod's certificate folder is read-only while the server certificate renews."""
        pod = self.random.choice(self.pods.ready_pods())
        event.notes.append(f"pod {pod.name}")
        with read_only_folder(pod.cert_dir):
            self.leaf_renewal(event)
            time.sleep(3.0)

    def rename(self, event):
        """An upgrade renames the Service; once the rollout is complete (what `helm upgrade
        --wait` or `kubectl rollout status` waits for) the targets are pointed at the new
        name, and the next upgrade removes the old Service. The chart keeps the Deployment
        (its pods roll) and the old Service while a target calls it; a new pod is ready once
        the old leader issued the new name beside the old one."""
        deployments = self.informers["deployments"]
        before = template_hash_of(deployments.get(DEPLOYMENT))
        self.service = RENAMED
        self.helm("upgrade", RELEASE, CHART, "--namespace", NS, values=self.values("sidecar"))
        self.wait(lambda: template_hash_of(deployments.get(DEPLOYMENT)) != before
                  and self.pods.rolled_out(deployments.get(DEPLOYMENT)), "the rollout")
        for kind, name in (("validatingwebhookconfiguration", VWC),
                           ("mutatingwebhookconfiguration", MWC)):
            self.kubectl("patch", kind, name, "--type=json", "-p", json.dumps([
                {"op": "replace", "path": "/webhooks/0/clientConfig/service/name",
                 "value": RENAMED}]))
        # The API servers call the old name until their caches hold the targets' new one.
        self.wait(lambda: self.called_hosts() == {f"{RENAMED}.{NS}.svc"},
                  "the API server's cache to hold the new name")
        self.helm("upgrade", RELEASE, CHART, "--namespace", NS, values=self.values("sidecar"))
        services = json.loads(self.kubectl("get", "services", "-n", NS, "-o", "json").stdout)
        names = sorted(s["metadata"]["name"] for s in services["items"])
        if SERVICE in names:
            raise SoakError(f"the old Service outlived the targets' move: {names}")
        event.notes.append(f"Services after: {', '.join(names)}")

    def life(self):
        """The events in order: (name, what, action, allowed causes with the reason)."""
        install = {"no-bundle": "installing: no caBundle injected yet",
                   "no-endpoints": "installing: no webhook pod yet"}
        fight = {"unknown-authority": "another writer replaced the caBundle; certctl puts "
                                      "it back"}
        return [
            ("install", "helm install in mode job: hook Jobs create the Secret and inject",
             self.install_with_hooks, install),
            ("controller-stopped", "mode job: no controller for longer than --renew-before, "
             "then helm upgrade, whose hook renews", self.controller_stopped, {}),
            ("to-sidecar", "helm upgrade to mode sidecar: one replica under leader election",
             self.to_sidecar, {}),
            ("leaf-renewal", "the controller renews the server certificate",
             self.leaf_renewal, {}),
            ("scale-up", "kubectl scale to 3 replicas", self.scale(3), {}),
            ("rotate-ca", "certctl rotate --ca, the leader SIGKILLed at each step",
             self.rotate_ca, {}),
            ("scale-down", "kubectl scale to 1 replica (leader hand-over)", self.scale(1), {}),
            ("api-unavailable", "the API refuses certctl's requests for longer than a renewal "
             "interval", self.api_unavailable, {}),
            ("tamper", "a rotation annotation edited by hand", self.tamper, {}),
            ("fighting-writer", "another injector writes its CA into a caBundle 5 times a second",
             self.fighting_writer, fight),
            ("read-only-folder", "a pod's certificate folder read-only during a renewal",
             self.folder_read_only, {}),
            ("ca-expiry", "the CA nears its end: certctl rotates it", self.ca_expiry, {}),
            ("rename", "helm upgrade renames the Service; the targets call the new name",
             self.rename, {}),
        ]

    def run(self):
        self._open()
        for name, what, action, allowed in self.life():
            self.run_event(Event(name, what, allowed), action)
        self.say(f"[{self.ledger.at(time.monotonic()):7.1f}s] the life is over: stopping")


