"""Legacy (unaggregated) discovery documents and /version (wire spec section 2.3)."""

from . import resources

VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.4",
           "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
           "buildDate": "2025-04-22T16:03:10Z", "goVersion": "go1.23.6", "compiler": "gc",
           "platform": "linux/amd64"}

# An empty protobuf document: kubectl decodes it and silently skips client-side validation.
# The media type must not contain '@' (Go's mime parser rejects the echoed Accept value).
OPENAPI_V2_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def api_versions(server_address):
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": server_address}]}


def api_group_list():
    groups = []
    for group, version in resources.group_versions():
        gv = {"groupVersion": f"{group}/{version}", "version": version}
        groups.append({"name": group, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group):
    versions = [v for g, v in resources.group_versions() if g == group]
    if not versions:
        return None
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": gvs,
            "preferredVersion": gvs[0]}


def api_resource_list(group, version):
    served = resources.in_group_version(group, version)
    if not served:
        return None
    items = []
    for r in served:
        entry = {"name": r.resource, "singularName": r.singular, "namespaced": r.namespaced,
                 "kind": r.kind, "verbs": r.verbs}
        if r.short_names:
            entry["shortNames"] = r.short_names
        if r.categories:
            entry["categories"] = r.categories
        items.append(entry)
        if r.status:
            items.append({"name": f"{r.resource}/status", "singularName": "",
                          "namespaced": r.namespaced, "kind": r.kind,
                          "verbs": ["get", "patch", "update"]})
        if r.scale:
            items.append({"name": f"{r.resource}/scale", "singularName": "",
                          "namespaced": r.namespaced, "group": "autoscaling", "version": "v1",
                          "kind": "Scale", "verbs": ["get", "patch", "update"]})
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": items}
