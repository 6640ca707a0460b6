"""batch/v1 Jobs as kube-apiserver 1.32 stores them (defaults, generated selector, status
subresource, field selectors, immutability), and what Helm's hook flow relies on."""

import json

JOBS = "/apis/batch/v1/namespaces/default/jobs"


def job(name=None, generate_name=None, labels=None, **spec):
    meta = {"name": name} if name else {"generateName": generate_name}
    if labels:
        meta["labels"] = labels
    pod = {"restartPolicy": "Never", "serviceAccountName": "hook",
           "containers": [{"name": "c", "image": "ghcr.io/x/certctl:0.1.0",
                           "args": ["job"], "ports": [{"containerPort": 80}],
                           "env": [{"name": "NS", "valueFrom": {"fieldRef": {
                               "fieldPath": "metadata.namespace"}}}]}],
           "volumes": [{"name": "s", "secret": {"secretName": "x"}}]}
    pod.update(spec.pop("pod", {}))
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"template": {"spec": pod}, **spec}}


def create(cluster, obj):
    resp = cluster.api("POST", JOBS, obj)
    assert resp.status == 201, resp
    return resp.json()


def test_job_defaults_and_generated_selector(cluster):
    created = create(cluster, job("hook"))
    meta, spec = created["metadata"], created["spec"]
    uid = meta["uid"]
    assert meta["generation"] == 1 and created["status"] == {}
    assert {k: spec[k] for k in ("completions", "parallelism", "backoffLimit", "completionMode",
                                 "suspend", "podReplacementPolicy")} == {
        "completions": 1, "parallelism": 1, "backoffLimit": 6,
        "completionMode": "NonIndexed", "suspend": False,
        "podReplacementPolicy": "TerminatingOrFailed"}
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    generated = {"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
                 "batch.kubernetes.io/job-name": "hook", "job-name": "hook"}
    assert spec["template"]["metadata"]["labels"] == generated
    assert meta["labels"] == generated  # the Job had none: it gets the template's
    pod = spec["template"]["spec"]
    assert {k: pod[k] for k in ("terminationGracePeriodSeconds", "dnsPolicy", "securityContext",
                                "schedulerName", "serviceAccount")} == {
        "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "securityContext": {}, "schedulerName": "default-scheduler",
        "serviceAccount": "hook"}
    assert "enableServiceLinks" not in pod  # a Pod default, not a PodTemplate one
    c = pod["containers"][0]
    assert (c["imagePullPolicy"], c["terminationMessagePath"], c["terminationMessagePolicy"],
            c["resources"]) == ("IfNotPresent", "/dev/termination-log", "File", {})
    assert c["ports"][0]["protocol"] == "TCP"
    assert c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert pod["volumes"][0]["secret"]["defaultMode"] == 420

    # Labels of its own stay; backoffLimit and completions/parallelism as given.
    own = create(cluster, job("own", labels={"app": "x"}, backoffLimit=0, parallelism=2))
    assert own["metadata"]["labels"] == {"app": "x"}
    assert (own["spec"]["backoffLimit"], own["spec"]["parallelism"]) == (0, 2)
    assert "completions" not in own["spec"]
    # generateName: the generated name is in the job-name labels.
    gen = create(cluster, job(generate_name="hook-"))
    name = gen["metadata"]["name"]
    assert name.startswith("hook-") and len(name) == 10
    assert gen["spec"]["template"]["metadata"]["labels"]["job-name"] == name


def test_job_validation(cluster):
    bad = job("bad", pod={"restartPolicy": "Always"})
    resp = cluster.api("POST", JOBS, bad)
    assert resp.status == 422
    assert resp.json()["message"] == (
        'Job.batch "bad" is invalid: spec.template.spec.restartPolicy: Unsupported value: '
        '"Always": supported values: "OnFailure", "Never"')
    empty = job("empty", pod={"containers": []})
    resp = cluster.api("POST", JOBS, empty)
    assert resp.status == 422
    assert resp.json()["message"] == ('Job.batch "empty" is invalid: '
                                      'spec.template.spec.containers: Required value')
    resp = cluster.api("POST", JOBS, job("neg", backoffLimit=-1))
    assert resp.json()["message"] == ('Job.batch "neg" is invalid: spec.backoffLimit: Invalid '
                                      'value: -1: must be greater than or equal to 0')


def test_status_subresource_and_immutable_template(cluster):
    created = create(cluster, job("hook"))
    created["status"] = {"startTime": "2025-05-01T10:00:00Z", "succeeded": 1, "conditions": [
        {"type": "Complete", "status": "True", "reason": "CompletionsReached"}]}
    created["spec"]["parallelism"] = 5  # ignored by the status subresource
    resp = cluster.api("PUT", f"{JOBS}/hook/status", created)
    assert resp.status == 200, resp
    updated = resp.json()
    assert updated["status"]["succeeded"] == 1 and updated["spec"]["parallelism"] == 1
    assert updated["metadata"]["generation"] == 1
    # The main resource ignores status; the pod template cannot change.
    updated["status"] = {}
    updated["metadata"]["labels"]["extra"] = "yes"
    resp = cluster.api("PUT", f"{JOBS}/hook", updated)
    assert resp.status == 200 and resp.json()["status"]["succeeded"] == 1
    current = resp.json()
    current["spec"]["template"]["spec"]["containers"][0]["args"] = ["other"]
    resp = cluster.api("PUT", f"{JOBS}/hook", current)
    assert resp.status == 422
    assert resp.json()["message"].startswith('Job.batch "hook" is invalid: spec.template: '
                                             'Invalid value: ')
    assert resp.json()["message"].endswith(": field is immutable")


def test_field_selectors_and_name_watch(cluster):
    create(cluster, job("a"))
    done = create(cluster, job("b"))
    rv = done["metadata"]["resourceVersion"]
    with cluster.watch(JOBS, fieldSelector="metadata.name=b", resourceVersion=rv,
                       timeoutSeconds="5") as stream:
        done["status"] = {"succeeded": 1}
        assert cluster.api("PUT", f"{JOBS}/b/status", done).status == 200
        event = next(stream)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("MODIFIED", "b")
    assert event["object"]["status"]["succeeded"] == 1
    names = lambda q: [j["metadata"]["name"] for j in  # noqa: E731
                       cluster.api("GET", f"{JOBS}?fieldSelector={q}").json()["items"]]
    assert names("status.successful=1") == ["b"]
    assert names("status.successful=0") == ["a"]
    assert names("status.successful!=1,metadata.name!=x") == ["a"]
    resp = cluster.api("GET", f"{JOBS}?fieldSelector=status.succeeded=1")
    assert resp.status == 400
    assert resp.json()["message"] == ('field label "status.succeeded" not supported for '
                                      'batchv1.Job')


def test_kubectl_apply_is_idempotent_until_the_template_changes(cluster):
    manifest = job("hook")
    manifest["metadata"]["namespace"] = "default"
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    proc = cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    assert proc.stdout.strip() == "job.batch/hook unchanged"
    manifest["spec"]["template"]["spec"]["containers"][0]["args"] = ["changed"]
    proc = cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest), check=False)
    assert proc.returncode != 0 and "field is immutable" in proc.stderr


def test_helm_release_secret_and_background_delete(cluster):
    secrets = "/api/v1/namespaces/default/secrets"
    release = {"metadata": {"name": "sh.helm.release.v1.rel.v1",
                            "labels": {"name": "rel", "owner": "helm", "status": "deployed",
                                       "version": "1"}},
               "type": "helm.sh/release.v1", "data": {"release": "SDRzSUFBQUFBQUFB"}}
    assert cluster.api("POST", secrets, release).status == 201
    listed = cluster.api("GET", f"{secrets}?labelSelector=owner%3Dhelm,name%3Drel").json()
    assert [(s["metadata"]["name"], s["type"]) for s in listed["items"]] == [
        ("sh.helm.release.v1.rel.v1", "helm.sh/release.v1")]
    create(cluster, job("hook"))
    resp = cluster.api("DELETE", f"{JOBS}/hook", {"propagationPolicy": "Background"})
    assert resp.status == 200 and resp.json()["status"] == "Success"
    assert cluster.api("GET", f"{JOBS}/hook").status == 404
