"""The documentation against the tools it describes, offline.

- Every `certctl ...` (or `kubectl certctl ...`) command line in the code blocks of README.md
  and docs/*.md names a real subcommand and only flags that subcommand accepts, as the built
  binary's `certctl SUB --help` lists them; a value given to a DURATION flag parses; a
  `certctl generate` line runs (into a temporary folder). A line whose block shows certctl's
  own "unknown flag" error is an example of that error: the binary must reject the flag so.
- Every ```yaml block of README.md and docs/ parses.
- The Argo CD and Flux snippets of docs/gitops.md use only fields those tools define: a small
  schema of the parts used, written from their API types (Argo CD's Application
  `spec.ignoreDifferences[]` and `argocd-cm` `resource.customizations.ignoreDifferences.*`
  keys; Flux's HelmRelease v2 `spec.driftDetection` and kustomize-controller's `ssa`
  annotation). jq paths are run through jq against a sample object when jq is installed.
"""

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

FENCE = re.compile(r"^(\s*)(```|~~~)\s*([\w+-]*)")
SHELL_LANGS = {"", "sh", "bash", "shell", "console", "text"}
GLOBAL_VALUE_FLAGS = {"--log-level", "--log-format"}
GLOBAL_BOOL_FLAGS = {"-h", "--help", "--help-all"}


def doc_files():
    return ["README.md"] + sorted(
        os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))


def code_blocks(path):
    """(language, first line number, lines) of each fenced block, the fence's indentation
    removed."""
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    block, indent, lang, start = None, "", "", 0
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if block is None:
            if match:
                block, indent, lang, start = [], match.group(1), match.group(3).lower(), number + 1
        elif match and line.strip() in ("```", "~~~"):
            yield lang, start, block
            block = None
        else:
            block.append(line[len(indent):] if line.startswith(indent) else line.lstrip())


# --- certctl command lines -----------------------------------------------------------------

class Flag:
    def __init__(self, takes_value, type_name):
        self.takes_value = takes_value
        self.type_name = type_name


# "  -n,--namespace TEXT   Namespace ...": the type follows the names after one space; the
# description starts after two or more.
OPTION = re.compile(r"^  (-[\w-]+(?:,-[\w-]+)*)(?: (\S+))?")


def parse_help(text):
    """{flag: Flag} from the Options section of CLI11's help."""
    flags, in_options = {}, False
    for line in text.splitlines():
        if line.startswith("Options:"):
            in_options = True
            continue
        if in_options and line and not line.startswith(" "):
            in_options = False
        if not in_options:
            continue
        match = OPTION.match(line)
        if not match:
            continue
        type_name = match.group(2) or ""
        takes_value = bool(type_name) and not type_name.startswith(("Excludes:", "Needs:"))
        type_name = type_name.split(":")[0].split("=")[0] if takes_value else ""
        for name in match.group(1).split(","):
            flags[name] = Flag(takes_value, type_name)
    return flags


SUBCOMMAND = re.compile(r"^  ([a-z]+)\s{2,}\S")


_CLI = {}


@pytest.fixture
def cli(certctl_binary):
    """{subcommand: {flag: Flag}}, global flags included in each, from the binary's help
    (read once per binary)."""
    if certctl_binary not in _CLI:
        _CLI[certctl_binary] = read_cli(certctl_binary)
    return _CLI[certctl_binary]


def read_cli(certctl_binary):
    top = subprocess.run([certctl_binary, "--help"], capture_output=True, text=True, check=True)
    subs, in_subs = [], False
    for line in top.stdout.splitlines():
        if line.startswith("Subcommands:"):
            in_subs = True
            continue
        match = SUBCOMMAND.match(line)
        if in_subs and match:
            subs.append(match.group(1))
    assert subs, top.stdout
    global_flags = parse_help(top.stdout)
    out = {}
    for sub in subs:
        text = subprocess.run([certctl_binary, sub, "--help"], capture_output=True, text=True,
                              check=True).stdout
        out[sub] = {**global_flags, **parse_help(text)}
    return out


def logical_lines(lines):
    """Shell lines of a block: continuations joined, a `$ ` prompt removed, with the line
    number where each starts."""
    joined, first = "", None
    for number, line in lines:
        if first is None:
            first = number
        if line.rstrip().endswith("\\"):
            joined += line.rstrip()[:-1] + " "
            continue
        joined += line
        text = joined.strip()
        if text.startswith("$ "):
            text = text[2:]
        yield first, text
        joined, first = "", None


def split_commands(text):
    """The simple commands of a shell line (split at |, ;, &&, ||), comments dropped."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars="|;&")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    command = []
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: not a command line
        return
    for token in tokens:
        if token in ("|", ";", "&&", "||", "&"):
            if command:
                yield command
            command = []
        else:
            command.append(token)
    if command:
        yield command


def certctl_args(words):
    """The arguments after `certctl` or `kubectl certctl`, or None for another command. The
    brackets of an optional part (`[--leader-elect]`) are dropped."""
    if words[:2] == ["kubectl", "certctl"]:
        args = words[2:]
    elif words and os.path.basename(words[0]) in ("certctl", "kubectl-certctl"):
        args = words[1:]
    else:
        return None
    out = []
    for word in args:
        if word.startswith("[") and word[1:2] == "-":
            word = word[1:]
        if word.endswith("]") and "[" not in word:
            word = word[:-1]
        out.append(word)
    return out


def is_placeholder(value):
    return bool(re.fullmatch(r"<[^>]+>|[A-Z][A-Z_]*|\$\{?\w+\}?|\.\.\.", value))


def check_command(args, cli):
    """Problems with one certctl invocation: [(message)], and the DURATION values and the
    parsed (subcommand, [(flag, value)])."""
    problems, durations, parsed = [], [], []
    sub = None
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "...":
            break
        if sub is None:
            name, eq, _ = word.partition("=")
            if name in GLOBAL_VALUE_FLAGS:
                i += 0 if eq else 1
                continue
            if name in GLOBAL_BOOL_FLAGS:
                continue
            if word.startswith("-"):
                problems.append(f"{word}: not a flag of certctl itself")
                continue
            if word not in cli:
                problems.append(f"{word}: no such subcommand (have {', '.join(sorted(cli))})")
                return problems, durations, (None, parsed)
            sub = word
            continue
        flags = cli[sub]
        if word == "--":
            if sub != "wait":
                problems.append(f"certctl {sub} takes no command after --")
            break
        if word.startswith("--"):
            name, eq, value = word.partition("=")
        elif re.fullmatch(r"-\w", word):
            name, eq, value = word, "", ""
        elif re.fullmatch(r"-\w.+", word):  # -nNAMESPACE
            name, eq, value = word[:2], "=", word[2:]
        else:
            problems.append(f"certctl {sub}: unexpected argument {word!r}")
            continue
        flag = flags.get(name)
        if flag is None:
            problems.append(f"certctl {sub}: no flag {name}")
            if not eq and i < len(args) and not args[i].startswith("-"):
                i += 1  # its value, presumably
            continue
        if flag.takes_value and not eq:
            if i >= len(args):
                problems.append(f"certctl {sub}: {name} needs a value")
                break
            value = args[i]
            i += 1
        elif not flag.takes_value and eq:
            problems.append(f"certctl {sub}: {name} takes no value")
        parsed.append((name, value))
        if flag.type_name == "DURATION" and not is_placeholder(value):
            durations.append((name, value))
    if sub is None and not problems:
        problems.append("no subcommand")
    return problems, durations, (sub, parsed)


def doc_commands():
    """(where, args, expected_error_flag) of every certctl command line in a code block."""
    out = []
    for path in doc_files():
        for lang, start, block in code_blocks(path):
            if lang not in SHELL_LANGS:
                continue
            numbered = list(enumerate(block, start))
            if any(line.startswith("$ ") for line in block):
                # A session: the commands are the prompted lines, the rest is their output.
                kept, going_on = [], False
                for number, line in numbered:
                    if line.startswith("$ ") or going_on:
                        kept.append((number, line))
                    going_on = (line.startswith("$ ") or going_on) and line.endswith("\\")
                numbered = kept
            text_of_block = "\n".join(block)
            for number, line in logical_lines(numbered):
                for words in split_commands(line):
                    args = certctl_args(words)
                    if args is None:
                        continue
                    expected = None
                    for word in args:
                        if re.search(r"unknown flag " + re.escape(word) + r"\b", text_of_block):
                            expected = word
                    out.append((f"{path}:{number}", args, expected))
    return out


@pytest.fixture
def pair_dir(certctl_binary, tmp_path):
    """A folder with a pair, for `certctl check` to judge offline."""
    subprocess.run([certctl_binary, "generate", "--service", "x", "-n", "y",
                    "--out-dir", str(tmp_path), "--force"], check=True, capture_output=True)
    return str(tmp_path)


def duration_parses(certctl_binary, pair_dir, value):
    """Whether certctl accepts the value as a DURATION: `check` of a local pair, offline,
    exits 2 only for a usage error."""
    result = subprocess.run([certctl_binary, "check", "--cert-dir", pair_dir, "--service", "x",
                             "-n", "y", "--renew-before", value],
                            capture_output=True, text=True)
    return result.returncode != 2, result.stderr.strip()


def problems_of(where, args, expected, cli, certctl_binary, pair_dir):
    problems, durations, (sub, parsed) = check_command(args, cli)
    if expected:
        if not any(expected in p for p in problems):
            return [f"{where}: shown as an error for {expected}, but {expected} is accepted"]
        result = subprocess.run([certctl_binary] + args, capture_output=True, text=True)
        if result.returncode != 2 or f"unknown flag {expected}" not in result.stderr:
            return [f"{where}: certctl {' '.join(args)} did not fail as shown: "
                    f"exit {result.returncode}, {result.stderr.strip()}"]
        return []
    out = [f"{where}: {p}" for p in problems]
    for name, value in durations:
        ok, err = duration_parses(certctl_binary, pair_dir, value)
        if not ok:
            out.append(f"{where}: {name} {value}: {err}")
    if not out and sub == "generate" and not any(is_placeholder(v) for _, v in parsed):
        # Run it, into a temporary folder in place of --out-dir or -o.
        keep = [a for name, value in parsed if name not in ("--out-dir", "-o", "--output",
                                                             "--force")
                for a in ((name,) if value == "" and not cli["generate"][name].takes_value
                          else (name, value))]
        with tempfile.TemporaryDirectory() as tmp:
            result = subprocess.run([certctl_binary, "generate"] + keep +
                                    ["--out-dir", tmp, "--force"],
                                    capture_output=True, text=True)
        if result.returncode != 0:
            out.append(f"{where}: certctl generate {' '.join(keep)} failed: "
                       f"{result.stderr.strip()}")
    return out


def test_the_docs_have_certctl_command_lines():
    commands = doc_commands()
    assert len(commands) > 20, commands
    assert any(args[:1] == ["generate"] for _, args, _ in commands)


def test_certctl_command_lines_in_the_docs(cli, certctl_binary, pair_dir):
    problems = []
    for where, args, expected in doc_commands():
        problems += problems_of(where, args, expected, cli, certctl_binary, pair_dir)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("line, wanted", [
    ("certctl generate --service s -n ns --out-dir ./certs", []),
    ("certctl generate --service s --namspace ns --out-dir ./certs", ["no flag --namspace"]),
    ("certctl chek -n ns", ["no such subcommand"]),
    ("certctl check --cert-dir ./certs --renew-before=30 d",
     ["unexpected argument 'd'", "--renew-before 30: "]),
    ("certctl check --renew-before 30dd --cert-dir ./certs", ["--renew-before 30dd"]),
    ("certctl generate --cert-validity 90x --service s", ["--cert-validity 90x"]),
    ("kubectl certctl rotate -n infra --ca --wait=yes", ["--wait takes no value"]),
    ("certctl generate --service <name> -n ns -o secret | kubectl apply -f -", []),
    ("certctl --log-level debug check --service s \\\n  --validatingwebhook w  # a comment",
     ["no flag --validatingwebhook"]),
    ("certctl wait --cert-dir /tls --timeout 2m -- /server --tls-dir /tls", []),
    ("certctl check --secret s --cert-dir d", []),  # exclusions are not this test's business
])
def test_the_checker_itself(line, wanted, cli, certctl_binary, pair_dir):
    found = []
    lines = list(enumerate(line.split("\n"), 1))
    for number, text in logical_lines(lines):
        for words in split_commands(text):
            args = certctl_args(words)
            if args is not None:
                found += problems_of(f"x:{number}", args, None, cli, certctl_binary, pair_dir)
    assert len(found) == len(wanted), found
    for problem, part in zip(found, wanted):
        assert part in problem, found


def test_the_checker_runs_generate_lines(cli, certctl_binary, pair_dir):
    # A line whose flags all exist but that generate refuses: an --ip that is no address.
    found = problems_of("x:1", ["generate", "--service", "s", "--ip", "300.1.1.1"], None, cli,
                        certctl_binary, pair_dir)
    assert len(found) == 1 and "failed" in found[0], found


# --- YAML blocks ----------------------------------------------------------------------------

def yaml_blocks(path):
    for lang, start, block in code_blocks(path):
        if lang in ("yaml", "yml"):
            yield start, "\n".join(block)


def all_yaml_blocks():
    return [(f"{path}:{start}", text) for path in doc_files()
            for start, text in yaml_blocks(path)]


def test_every_yaml_block_parses():
    blocks = all_yaml_blocks()
    assert len(blocks) > 10
    problems = []
    for where, text in blocks:
        try:
            list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            problems.append(f"{where}: {e}")
    assert problems == [], "\n".join(problems)


# --- docs/gitops.md against Argo CD's and Flux's fields ------------------------------------

# The API groups of the kinds certctl writes a caBundle into.
GROUP_OF = {
    "ValidatingWebhookConfiguration": "admissionregistration.k8s.io",
    "MutatingWebhookConfiguration": "admissionregistration.k8s.io",
    "CustomResourceDefinition": "apiextensions.k8s.io",
    "APIService": "apiregistration.k8s.io",
}

# Argo CD, pkg/apis/application/v1alpha1: ResourceIgnoreDifferences (an Application's
# spec.ignoreDifferences[] item) and the value of an argocd-cm
# resource.customizations.ignoreDifferences.<group>_<Kind> key (OverrideIgnoreDiff).
ARGO_PATH_FIELDS = {"jsonPointers", "jqPathExpressions", "managedFieldsManagers"}
ARGO_IGNORE_ITEM = {"group", "kind", "name", "namespace"} | ARGO_PATH_FIELDS
ARGO_CM_PREFIX = "resource.customizations.ignoreDifferences."
ARGO_SPEC_USED = {"ignoreDifferences", "syncPolicy", "source", "sources", "destination",
                  "project"}
ARGO_SYNC_POLICY = {"automated", "syncOptions", "retry", "managedNamespaceMetadata"}
ARGO_SYNC_OPTIONS = {"Validate", "CreateNamespace", "PrunePropagationPolicy", "PruneLast",
                     "ApplyOutOfSyncOnly", "RespectIgnoreDifferences", "ServerSideApply",
                     "Replace", "FailOnSharedResource", "Prune", "Delete",
                     "SkipDryRunOnMissingResource", "Force"}

# Flux helm-controller api/v2: DriftDetection, IgnoreRule; its target is a
# fluxcd/pkg/apis/kustomize Selector.
FLUX_DRIFT = {"mode", "ignore"}
FLUX_DRIFT_MODES = {"enabled", "warn", "disabled"}
FLUX_IGNORE_RULE = {"paths", "target"}
FLUX_SELECTOR = {"group", "version", "kind", "name", "namespace", "annotationSelector",
                 "labelSelector"}
# kustomize-controller: the kustomize.toolkit.fluxcd.io/ssa annotation's values.
FLUX_SSA_VALUES = {"Override", "Merge", "IfNotPresent", "Ignore"}

JSON_POINTER = re.compile(r"^(/([^~/]|~[01])*)+$")


def string_list(value, where, problems):
    if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
        problems.append(f"{where}: not a list of strings: {value!r}")
        return []
    return value


def check_argo_paths(entry, kind, where, problems):
    """The path fields of an ignore entry (Application item or argocd-cm value)."""
    if "jsonPointers" in entry:
        for pointer in string_list(entry["jsonPointers"], f"{where}.jsonPointers", problems):
            if not JSON_POINTER.match(pointer):
                problems.append(f"{where}: {pointer!r} is not a JSON pointer")
    if "jqPathExpressions" in entry:
        for expr in string_list(entry["jqPathExpressions"], f"{where}.jqPathExpressions",
                                problems):
            check_jq(expr, kind, where, problems)
    if "managedFieldsManagers" in entry:
        string_list(entry["managedFieldsManagers"], f"{where}.managedFieldsManagers", problems)
    if not ARGO_PATH_FIELDS & set(entry):
        problems.append(f"{where}: names no path and no manager")


def sample(kind):
    webhooks = [{"name": f"w{i}.example.com", "failurePolicy": "Ignore",
                 "clientConfig": {"caBundle": "Q0E=", "service": {"name": "s"}}}
                for i in range(2)]
    return {
        "ValidatingWebhookConfiguration": {"webhooks": webhooks},
        "MutatingWebhookConfiguration": {"webhooks": webhooks},
        "CustomResourceDefinition": {"spec": {"conversion": {"strategy": "Webhook", "webhook": {
            "clientConfig": {"caBundle": "Q0E="}}}}},
        "APIService": {"spec": {"caBundle": "Q0E=", "service": {"name": "s"}}},
    }.get(kind)


def check_jq(expr, kind, where, problems):
    """The expression is a jq path that, on a sample object of the kind, names a caBundle or
    a failurePolicy (what certctl writes)."""
    obj = sample(kind)
    if obj is None or shutil.which("jq") is None:
        return
    result = subprocess.run(["jq", "-c", f"[path({expr})]"], input=json.dumps(obj),
                            capture_output=True, text=True)
    if result.returncode != 0:
        problems.append(f"{where}: jq rejects {expr!r}: {result.stderr.strip()}")
        return
    paths = json.loads(result.stdout)
    if not paths or not all(p and p[-1] in ("caBundle", "failurePolicy") for p in paths):
        problems.append(f"{where}: {expr!r} names {paths} on a {kind}, not what certctl writes")


def check_argo_item(item, where, problems):
    if not isinstance(item, dict):
        problems.append(f"{where}: not a mapping")
        return
    for key in set(item) - ARGO_IGNORE_ITEM:
        problems.append(f"{where}: Argo CD's ignoreDifferences items have no field {key!r}")
    kind = item.get("kind")
    if kind in GROUP_OF and item.get("group") != GROUP_OF[kind]:
        problems.append(f"{where}: {kind} is in group {GROUP_OF[kind]}, not {item.get('group')}")
    if not kind:
        problems.append(f"{where}: no kind")
    check_argo_paths(item, kind, where, problems)


def check_argo_spec(spec, where, problems):
    for key in set(spec) - ARGO_SPEC_USED:
        problems.append(f"{where}: an Application spec has no field {key!r}")
    for i, item in enumerate(spec.get("ignoreDifferences", [])):
        check_argo_item(item, f"{where}.spec.ignoreDifferences[{i}]", problems)
    policy = spec.get("syncPolicy", {})
    for key in set(policy) - ARGO_SYNC_POLICY:
        problems.append(f"{where}: syncPolicy has no field {key!r}")
    for option in policy.get("syncOptions", []):
        name, eq, value = str(option).partition("=")
        if not eq or name not in ARGO_SYNC_OPTIONS:
            problems.append(f"{where}: {option!r} is not an Argo CD sync option")


def check_argo_cm(doc, where, problems):
    if doc.get("metadata", {}).get("name") != "argocd-cm":
        problems.append(f"{where}: Argo CD reads these keys from the ConfigMap argocd-cm")
    for key, value in doc.get("data", {}).items():
        if not key.startswith(ARGO_CM_PREFIX):
            problems.append(f"{where}: {key}: not a resource.customizations.ignoreDifferences key")
            continue
        target = key[len(ARGO_CM_PREFIX):]
        group, _, kind = target.rpartition("_")
        if target != "all" and (kind not in GROUP_OF or group != GROUP_OF[kind]):
            problems.append(f"{where}: {key}: the suffix must be <group>_<Kind> of a kind "
                            f"certctl writes")
        if not isinstance(value, str):
            problems.append(f"{where}: {key}: argocd-cm values are strings (use `|`)")
            continue
        entry = yaml.safe_load(value)
        if not isinstance(entry, dict):
            problems.append(f"{where}: {key}: the value is not a mapping")
            continue
        for field in set(entry) - ARGO_PATH_FIELDS:
            problems.append(f"{where}: {key}: no field {field!r} (group and kind are in the key)")
        check_argo_paths(entry, kind, f"{where}: {key}", problems)


def check_flux_rule(rule, where, problems):
    if not isinstance(rule, dict):
        problems.append(f"{where}: not a mapping")
        return
    for key in set(rule) - FLUX_IGNORE_RULE:
        problems.append(f"{where}: Flux's ignore rules have no field {key!r}")
    for pointer in string_list(rule.get("paths"), f"{where}.paths", problems):
        if not JSON_POINTER.match(pointer):
            problems.append(f"{where}: {pointer!r} is not a JSON pointer")
    target = rule.get("target")
    if not isinstance(target, dict):
        problems.append(f"{where}: no target: the rule would cover every object of the release")
        return
    for key in set(target) - FLUX_SELECTOR:
        problems.append(f"{where}: a Flux target selector has no field {key!r}")
    kind = target.get("kind")
    if kind not in GROUP_OF:
        problems.append(f"{where}: target kind {kind!r} is not one certctl writes")
    elif target.get("group", GROUP_OF[kind]) != GROUP_OF[kind]:
        problems.append(f"{where}: {kind} is in group {GROUP_OF[kind]}")
    if "name" not in target:
        problems.append(f"{where}: no target.name")


def check_flux_drift(drift, where, problems):
    for key in set(drift) - FLUX_DRIFT:
        problems.append(f"{where}: driftDetection has no field {key!r}")
    if drift.get("mode", "disabled") not in FLUX_DRIFT_MODES:
        problems.append(f"{where}: driftDetection.mode {drift.get('mode')!r}")
    for i, rule in enumerate(drift.get("ignore", [])):
        check_flux_rule(rule, f"{where}.ignore[{i}]", problems)
    return {r.get("target", {}).get("kind") for r in drift.get("ignore", [])
            if isinstance(r, dict) and isinstance(r.get("target"), dict)}


def check_gitops_snippet(doc, where, problems):
    """Classifies one YAML document of docs/gitops.md and checks it; returns its class."""
    if isinstance(doc, list):
        if all(isinstance(i, dict) and "paths" in i for i in doc):
            for i, rule in enumerate(doc):
                check_flux_rule(rule, f"{where}[{i}]", problems)
            return "flux-ignore-rules"
        if all(isinstance(i, dict) and "kind" in i for i in doc):
            for i, item in enumerate(doc):
                check_argo_item(item, f"{where}[{i}]", problems)
            return "argo-ignore-items"
    elif isinstance(doc, dict):
        if doc.get("kind") == "ConfigMap":
            check_argo_cm(doc, where, problems)
            return "argocd-cm"
        spec = doc.get("spec", {})
        if set(doc) == {"spec"} and "driftDetection" in spec:
            for key in set(spec) - {"driftDetection"}:
                problems.append(f"{where}: unexpected HelmRelease field {key!r} here")
            kinds = check_flux_drift(spec["driftDetection"], f"{where}.spec.driftDetection",
                                     problems)
            missing = set(GROUP_OF) - kinds
            if missing:
                problems.append(f"{where}: no ignore rule for {sorted(missing)}")
            return "flux-drift"
        if set(doc) == {"spec"} and "ignoreDifferences" in spec:
            check_argo_spec(spec, where, problems)
            kinds = {i.get("kind") for i in spec["ignoreDifferences"]}
            missing = set(GROUP_OF) - kinds
            if missing:
                problems.append(f"{where}: no ignoreDifferences entry for {sorted(missing)}")
            return "argo-application"
        if doc.get("kind") in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            annotations = doc.get("metadata", {}).get("annotations", {})
            for key, value in annotations.items():
                if key.startswith("kustomize.toolkit.fluxcd.io/"):
                    if key != "kustomize.toolkit.fluxcd.io/ssa" or value not in FLUX_SSA_VALUES:
                        problems.append(f"{where}: {key}: {value} is not a kustomize-controller "
                                        f"apply policy")
            for webhook in doc.get("webhooks", []):
                if "caBundle" in webhook.get("clientConfig", {}):
                    problems.append(f"{where}: the manifest must leave caBundle out")
            return "webhook-configuration"
    problems.append(f"{where}: a snippet this test does not know: {doc!r}")
    return None


def test_gitops_snippets_use_only_fields_argo_cd_and_flux_define():
    problems, classes = [], []
    for start, text in yaml_blocks("docs/gitops.md"):
        for doc in yaml.safe_load_all(text):
            classes.append(check_gitops_snippet(doc, f"docs/gitops.md:{start}", problems))
    assert problems == [], "\n".join(problems)
    for wanted in ("argo-application", "argocd-cm", "argo-ignore-items", "flux-drift",
                   "flux-ignore-rules", "webhook-configuration"):
        assert wanted in classes, classes


@pytest.mark.parametrize("snippet, wanted", [
    # The Application form in argocd-cm: the mistake this test is there for.
    ("""
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm}
data:
  resource.customizations: |
    ignoreDifferences:
      - group: admissionregistration.k8s.io
        kind: ValidatingWebhookConfiguration
""", "not a resource.customizations.ignoreDifferences key"),
    ("""
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm}
data:
  resource.customizations.ignoreDifferences.ValidatingWebhookConfiguration: |
    jqPathExpressions: [".webhooks[]?.clientConfig.caBundle"]
""", "<group>_<Kind>"),
    ("""
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm}
data:
  resource.customizations.ignoreDifferences.admissionregistration.k8s.io_ValidatingWebhookConfiguration: |
    kind: ValidatingWebhookConfiguration
    jqPathExpressions: [".webhooks[]?.clientConfig.caBundle"]
""", "no field 'kind'"),
    ("""
spec:
  ignoreDifferences:
    - group: admissionregistration.k8s.io
      kind: ValidatingWebhookConfiguration
      jsonPointer: [/webhooks/0/clientConfig/caBundle]
""", "no field 'jsonPointer'"),
    ("""
spec:
  driftDetection:
    mode: enabled
    ignore:
      - paths: [/webhooks/0/clientConfig/caBundle]
        target: {kind: ValidatingWebhookConfiguration, names: my-webhook}
""", "no field 'names'"),
    ("""
- paths: [webhooks.0.clientConfig.caBundle]
  target: {kind: ValidatingWebhookConfiguration, name: my-webhook}
""", "not a JSON pointer"),
    ("""
- group: admissionregistration.k8s.io
  kind: MutatingWebhookConfiguration
  jqPathExpressions: [".webhooks[].clientConfig.caBundl"]
""", "not what certctl writes"),
])
def test_the_gitops_schema_rejects(snippet, wanted):
    if "caBundl\"" in snippet and shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    problems = []
    check_gitops_snippet(yaml.safe_load(snippet), "x", problems)
    assert any(wanted in p for p in problems), problems
