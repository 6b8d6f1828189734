"""The krew manifest hack/release.py writes against krew's own validation rules, and the archive it points at.

The manifest is written by the release build next to the archive, from the committed template
hack/krew-manifest.template.yaml, which names no sha256 (so no commit has to carry the digest of
its own tree). The rules mirror krew's pkg/index/validation (ValidatePlugin, validatePlatform, validateSelector)
and its semver parser (a leading 'v', then a semantic version). The release test builds the archive
with hack/release.py into a temporary directory and runs the zipapp with `python3 -I -S`: without
site-packages, so it passes only if the archive is self-contained.
"""
import copy
import hashlib
import json
import importlib.util
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).parents[3]
TEMPLATE = REPO / "hack" / "krew-manifest.template.yaml"
RELEASE = REPO / "hack" / "release.py"
CLI = REPO / "kubectl_repack" / "cli.py"

KREW_API_VERSION = "krew.googlecontainertools.github.com/v1alpha2"
SAFE_NAME = re.compile(r"^[\w-]+$")
WINDOWS_FORBIDDEN = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)),
                     *(f"lpt{i}" for i in range(1, 10))}
SHA256 = re.compile(r"^[a-f0-9]{64}$")
# k8s.io/apimachinery ParseSemantic after krew's "must start with v" check.
SEMVER = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                    r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$")
PLATFORMS = {(os_, arch) for os_ in ("linux", "darwin") for arch in ("amd64", "arm64")}


def krew_problems(plugin, name="repack"):
    """What krew's ValidatePlugin (plus krew-index conventions) would refuse, as messages."""
    problems = []
    if plugin.get("apiVersion") != KREW_API_VERSION:
        problems.append(f"apiVersion {plugin.get('apiVersion')!r} not supported")
    if plugin.get("kind") != "Plugin":
        problems.append(f"kind {plugin.get('kind')!r}, only 'Plugin' is supported")
    if not SAFE_NAME.match(name) or name.lower() in WINDOWS_FORBIDDEN:
        problems.append(f"plugin name {name!r} not allowed")
    if plugin.get("metadata", {}).get("name") != name:
        problems.append(f"plugin should be named {name!r}")
    spec = plugin.get("spec", {})
    short = spec.get("shortDescription", "")
    if not short:
        problems.append("should have a short description")
    elif "\n" in short.strip() or len(short) > 60:
        problems.append("shortDescription should be one short line")
    if not spec.get("platforms"):
        problems.append("should have a platform specified")
    version = spec.get("version", "")
    if not version:
        problems.append("should have a version specified")
    elif not SEMVER.match(version):
        problems.append(f"version {version!r} is not a semantic version with a leading 'v'")
    for index, platform in enumerate(spec.get("platforms") or []):
        where = f"platforms[{index}]"
        if not platform.get("uri"):
            problems.append(f"{where}: URI has to be set")
        if not platform.get("sha256"):
            problems.append(f"{where}: sha256 sum has to be set")
        elif not SHA256.match(platform["sha256"]):
            problems.append(f"{where}: sha256 {platform['sha256']!r} is not valid")
        if not platform.get("bin"):
            problems.append(f"{where}: bin has to be set")
        if not platform.get("files"):
            problems.append(f"{where}: can't have a plugin without specifying file operations")
        for op in platform.get("files") or []:
            if not op.get("from") or not op.get("to"):
                problems.append(f"{where}: file operation needs from and to")
        selector = platform.get("selector")
        if selector is None:
            problems.append(f"{where}: nil selector is not supported")
            continue
        labels, expressions = selector.get("matchLabels"), selector.get("matchExpressions")
        if labels is None and not expressions:
            problems.append(f"{where}: empty selector is not supported")
        keys = list(labels or {}) + [e.get("key") for e in expressions or []]
        problems += [f"{where}: key {k!r} not supported" for k in keys if k not in ("os", "arch")]
        if labels is not None and not labels:
            problems.append(f"{where}: matchLabels specified but empty")
        if expressions is not None and not expressions:
            problems.append(f"{where}: matchExpressions specified but empty")
    return problems


@pytest.fixture(scope="module")
def manifest():
    """The manifest the release build writes, for a stand-in digest (no build needed for its shape)."""
    release = load_release()
    return yaml.safe_load(release.manifest_text(release.release_version(), "a" * 64, ["kubectl-repack", "LICENSE"]))


def test_manifest_passes_krew_validation(manifest):
    assert krew_problems(manifest) == []


@pytest.mark.parametrize("path,value,problem", [
    (("metadata", "name"), "re pack", "plugin name 're pack' not allowed"),
    (("metadata", "name"), "kubectl-repack", "plugin should be named 'repack'"),
    (("spec", "version"), "0.1.0", "version '0.1.0' is not a semantic version with a leading 'v'"),
    (("spec", "version"), "v0.1", "version 'v0.1' is not a semantic version with a leading 'v'"),
    (("spec", "shortDescription"), "", "should have a short description"),
    (("spec", "shortDescription"), "two\nlines", "shortDescription should be one short line"),
    (("spec", "platforms"), [], "should have a platform specified"),
    (("kind",), "Plug", "kind 'Plug', only 'Plugin' is supported"),
])
def test_krew_rules_catch_broken_manifests(manifest, path, value, problem):
    broken = copy.deepcopy(manifest)
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert problem in krew_problems(broken, name="re pack" if value == "re pack" else "repack")


@pytest.mark.parametrize("field,value,problem", [
    ("sha256", "ABC", "platforms[0]: sha256 'ABC' is not valid"),
    ("sha256", "", "platforms[0]: sha256 sum has to be set"),
    ("uri", "", "platforms[0]: URI has to be set"),
    ("bin", "", "platforms[0]: bin has to be set"),
    ("files", [], "platforms[0]: can't have a plugin without specifying file operations"),
    ("selector", None, "platforms[0]: nil selector is not supported"),
    ("selector", {"matchLabels": {"os": "linux", "gpu": "yes"}}, "platforms[0]: key 'gpu' not supported"),
    ("selector", {}, "platforms[0]: empty selector is not supported"),
    ("selector", {"matchLabels": {}}, "platforms[0]: matchLabels specified but empty"),
])
def test_krew_platform_rules_catch_broken_platforms(manifest, field, value, problem):
    broken = copy.deepcopy(manifest)
    broken["spec"]["platforms"][0][field] = value
    assert problem in krew_problems(broken)


def test_platforms_cover_linux_and_darwin_on_amd64_and_arm64(manifest):
    seen = [(p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"])
            for p in manifest["spec"]["platforms"]]
    assert sorted(seen) == sorted(PLATFORMS)


def test_platforms_install_the_one_archive_as_kubectl_repack(manifest):
    version = manifest["spec"]["version"]
    for platform in manifest["spec"]["platforms"]:
        assert platform["uri"].startswith("https://")
        assert platform["uri"].endswith(f"/{version}/kubectl-repack-{version}.tar.gz")
        assert platform["bin"] == "kubectl-repack"
        assert {"from": "kubectl-repack", "to": "."} in platform["files"]
    assert len({(p["uri"], p["sha256"]) for p in manifest["spec"]["platforms"]}) == 1


def test_manifest_texts(manifest):
    spec = manifest["spec"]
    assert manifest["metadata"]["name"] == "repack" and spec["version"] == "v0.1.0"
    assert spec["homepage"].startswith("https://")
    assert spec["description"].strip() and len(spec["description"]) > len(spec["shortDescription"])
    assert re.search(r"[Pp]ython3? >= 3\.10", spec["caveats"])


def test_manifest_version_is_the_package_version(manifest):
    from kubectl_repack import __version__
    assert manifest["spec"]["version"] == f"v{__version__}"


def load_release():
    spec = importlib.util.spec_from_file_location("release", RELEASE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_release_pins_a_pure_python_dependency_set():
    release = load_release()
    requirements = " ".join(release.REQUIREMENTS)
    assert "jsonschema>=4.17,<4.18" in requirements  # 4.18+ needs the compiled rpds-py
    assert "kubernetes>=29.0.0,<36" in requirements  # 36 pulls aiohttp, 37 pydantic-core
    assert release.PACKAGES == ("planner", "kubectl_repack")
    assert (release.ENTRY_MODULE, release.ENTRY_FUNCTION) == ("kubectl_repack.cli", "main")


def test_manifest_text_sets_version_sha_and_file_lists():
    release = load_release()
    text = release.manifest_text("v9.8.7", "a" * 64, ["kubectl-repack", "LICENSE"])
    parsed = yaml.safe_load(text)
    assert parsed["spec"]["version"] == "v9.8.7" and "${" not in text
    platforms = parsed["spec"]["platforms"]
    assert len(platforms) == 4
    for platform in platforms:
        assert platform["sha256"] == "a" * 64
        assert platform["uri"].endswith("/download/v9.8.7/kubectl-repack-v9.8.7.tar.gz")
        assert platform["files"] == [{"from": "kubectl-repack", "to": "."},
                                     {"from": "LICENSE", "to": "."}]
    assert text.startswith("# krew plugin manifest of kubectl-repack v9.8.7, written by hack/release.py")
    assert "Template" not in text and "caveats: |" in text  # the template's own comments go, the rest stays


def test_committed_template_names_no_digest():
    """No committed file carries the sha256 of the tree it is in: a code change needs no manifest commit."""
    template = yaml.safe_load(TEMPLATE.read_text())
    assert [p["sha256"] for p in template["spec"]["platforms"]] == [""] * 4
    assert template["spec"]["version"] == "${version}"
    assert not (REPO / "krew-manifest.yaml").exists()


@pytest.fixture(scope="module")
def release_build(tmp_path_factory):
    """Run hack/release.py into a temporary dist, with a copy of the manifest."""
    from tests.release import build_release
    archive, manifest, unpacked = build_release(tmp_path_factory.mktemp("release"))
    return archive, yaml.safe_load(manifest.read_text()), unpacked


def test_release_archive_matches_its_manifest(release_build):
    """The build writes the manifest of this version next to the archive: it names the archive's
    sha256 and what it holds, and passes krew's validation."""
    from kubectl_repack import __version__
    archive, manifest, unpacked = release_build
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert krew_problems(manifest) == []
    assert manifest["spec"]["version"] == f"v{__version__}"
    for platform in manifest["spec"]["platforms"]:
        assert platform["sha256"] == digest
        assert platform["uri"].endswith(f"/{archive.name}")
        assert [op["from"] for op in platform["files"]] == ["kubectl-repack", "LICENSE"]
        for op in platform["files"]:
            assert (unpacked / op["from"]).is_file(), op
        assert (unpacked / platform["bin"]).stat().st_mode & 0o111
    if (REPO / "LICENSE").is_file():
        assert (unpacked / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()


def test_zipapp_is_pure_python_with_our_packages(release_build):
    _, _, unpacked = release_build
    zipapp = unpacked / "kubectl-repack"
    assert zipapp.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(zipapp) as archive:
        names = archive.namelist()
        assert "__main__.py" in names
        assert not [n for n in names if n.endswith((".so", ".pyd", ".dylib"))]
        assert not [n for n in names if n.startswith("webhook/")]
        crd = archive.read("kubectl_repack/data/repackruns-crd.yaml")
    assert crd == (REPO / "config" / "crd" / "repack.volcano.sh_repackruns.yaml").read_bytes()
    for package in ("planner/__init__.py", "kubectl_repack/schema.py", "click/__init__.py",
                    "yaml/__init__.py", "jsonschema/__init__.py", "kubernetes/__init__.py"):
        assert package in names, package


VALIDATE_IN_ZIPAPP = """
import sys
sys.path.insert(0, sys.argv[1])
import kubernetes.client, kubernetes.config
from kubectl_repack.schema import validate_run_text
from kubectl_repack.errors import ValidationError
assert all(not p.endswith("site-packages") for p in sys.path), sys.path
validate_run_text(open(sys.argv[2]).read(), "sample")
try:
    validate_run_text("apiVersion: repack.volcano.sh/v1alpha1\\nkind: RepackRun\\n"
                      "metadata: {name: r}\\nspec: {mode: Foo, goals: [{resource: cpu}], x: 1}\\n")
except ValidationError as exc:
    print("\\n".join(exc.errors))
"""


def test_zipapp_validates_runs_with_a_bare_interpreter(release_build):
    _, _, unpacked = release_build
    sample = REPO / "config" / "samples" / "ascend-complete-execute-001.yaml"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", VALIDATE_IN_ZIPAPP, str(unpacked / "kubectl-repack"),
         str(sample)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "spec.goals[0].resource: goals.resource must be a fully-qualified accelerator/extended "
        "resource (e.g. nvidia.com/gpu); core resources like cpu, memory and ephemeral-storage "
        "are not supported",
        "spec.mode: 'Foo' is not one of ['DryRun', 'Execute']",
        "spec.x: unknown field",
    ]


@pytest.mark.skipif(not CLI.exists(), reason="kubectl_repack/cli.py (the click CLI) is not written yet")
def test_zipapp_help_lists_the_subcommands_with_a_bare_interpreter(release_build):
    _, _, unpacked = release_build
    done = subprocess.run([sys.executable, "-I", "-S", str(unpacked / "kubectl-repack"), "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^\s+plan\b", done.stdout, re.M), done.stdout


CORPUS_IN_ZIPAPP = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from kubectl_repack.errors import ValidationError
from kubectl_repack.schema import validate_run_text
results = {}
for path in sorted(Path(sys.argv[2]).iterdir()):
    if path.suffix in (".yaml", ".json"):
        try:
            validate_run_text(path.read_text(), path.name)
            results[path.name] = []
        except ValidationError as exc:
            results[path.name] = exc.errors
print(json.dumps(results))
"""


def test_zipapp_gives_the_corpus_messages_with_its_own_vendored_libraries(release_build):
    """The zipapp vendors older jsonschema and pure PyYAML: users must see the same errors."""
    from tests.unit.validation.test_corpus import INVALID, expected_lines
    _, _, unpacked = release_build
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", CORPUS_IN_ZIPAPP, str(unpacked / "kubectl-repack"),
         str(INVALID[0].parent)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert results == {path.name: expected_lines(path) for path in INVALID}


# ---- every command of the zipapp that needs no cluster, as a krew user runs it -------------------
def _zipapp(release_build):
    return release_build[2] / "kubectl-repack"


def test_zipapp_version_is_the_package_version(release_build):
    from kubectl_repack import __version__
    from tests.release import run_zipapp
    done = run_zipapp(_zipapp(release_build), "--version")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"kubectl repack {__version__}\n"


def test_zipapp_plans_the_seed_offline(release_build):
    from tests.release import run_zipapp
    done = run_zipapp(_zipapp(release_build), "plan", "--snapshot", "examples/seed-3-nodes.yaml",
                      "-f", "examples/guarded-dryrun.yaml")
    assert done.returncode == 0, done.stderr
    assert "ascend-node-01" in done.stdout and "RepackRecommended" in done.stdout
    done = run_zipapp(_zipapp(release_build), "plan", "--snapshot", "examples/seed-3-nodes.yaml",
                      "-f", "examples/guarded-dryrun.yaml", "-o", "yaml")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["status"]["plan"]["freedNodes"] == ["ascend-node-01"]


def test_zipapp_install_dry_run_renders_every_object_without_key_material(release_build):
    """The zipapp cannot carry `cryptography` (compiled) and does not need it: install makes no
    certificate (the controller does, in the cluster), so its rendering has no key in it."""
    from tests.release import run_zipapp
    done = run_zipapp(_zipapp(release_build), "install", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "PRIVATE KEY" not in done.stdout and "caBundle:" not in done.stdout and "tls.key" not in done.stdout
    kinds = [d["kind"] for d in yaml.safe_load_all(done.stdout) if d]
    assert kinds[0] == "CustomResourceDefinition" and kinds[-1] == "MutatingWebhookConfiguration"
    assert "Secret" not in kinds and kinds.count("Deployment") == 3     # webhook, coordinator, controller
    done = run_zipapp(_zipapp(release_build), "install", "--dry-run=client", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["kind"] == "List" and "PRIVATE KEY" not in done.stdout


def test_zipapp_install_with_a_webhook_url_says_what_to_use_instead_of_a_traceback(release_build):
    """Only a webhook served outside the cluster needs a pair made here, so only that names the library."""
    from tests.release import run_zipapp
    done = run_zipapp(_zipapp(release_build), "install", "--dry-run", "--webhook-url", "https://127.0.0.1:9443/mutate")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: kubectl repack install --webhook-url needs the Python library `cryptography`")
    assert "pipx install 'kubectl-repack[webhook]'" in done.stderr and done.stdout == ""


def test_zipapp_install_fails_cleanly_without_a_cluster(release_build, tmp_path):
    from tests.release import run_zipapp
    for args in (("install",), ("install", "--dry-run=server")):
        done = run_zipapp(_zipapp(release_build), *args, "--kubeconfig", str(tmp_path / "missing"))
        assert done.returncode == 1, (args, done.stderr)
        assert done.stderr == f"error: kubeconfig {tmp_path / 'missing'}: no such file\n", args


def test_zipapp_uninstall_dry_run_lists_the_objects(release_build):
    from tests.release import run_zipapp
    done = run_zipapp(_zipapp(release_build), "uninstall", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "mutatingwebhookconfiguration.admissionregistration.k8s.io/repack-placement deleted (dry run)" \
        in done.stdout


def test_zipapp_cluster_commands_fail_cleanly_without_a_cluster(release_build, tmp_path):
    from tests.release import run_zipapp
    for args in (("status", "x"), ("snapshot", "-o", str(tmp_path / "s.yaml")),
                 ("apply", "--resume", "x"), ("plan", "-f", "examples/guarded-dryrun.yaml")):
        done = run_zipapp(_zipapp(release_build), *args, "--kubeconfig", str(tmp_path / "missing"))
        assert done.returncode == 1, (args, done.stderr)
        assert done.stderr == f"error: kubeconfig {tmp_path / 'missing'}: no such file\n", args


def test_the_zipapp_vendors_exactly_the_pinned_set(release_build):
    """One constraints file for the pip install, the tests and the zipapp: every vendored
    distribution is at the version constraints.txt pins."""
    import re as _re

    _, _, unpacked = release_build
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[_re.sub(r"[-_.]+", "-", name).lower()] = version
    import zipfile
    with zipfile.ZipFile(unpacked / "kubectl-repack") as z:
        vendored = {_re.sub(r"[-_.]+", "-", n.split("/")[0][:-len(".dist-info")].rsplit("-", 1)[0]).lower():
                    n.split("/")[0][:-len(".dist-info")].rsplit("-", 1)[1]
                    for n in z.namelist() if n.split("/")[0].endswith(".dist-info")}
    assert vendored and {n: v for n, v in vendored.items()} == {n: pins[n] for n in vendored}
    assert vendored["jsonschema"] == "4.17.3" and vendored["kubernetes"] == "35.0.0"


# ---- reproducible on any machine (CLI-3) ------------------------------------------------------
def _build(python, cache, out):
    """hack/release.py run by `python` with vendor cache `cache`; the archive's bytes, after
    checking that the manifest written next to it names that archive's sha256."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(python), str(RELEASE), "--dist", str(out), "--cache", str(cache)],
                   check=True, cwd=out, timeout=600, capture_output=True)
    data = next(out.glob("kubectl-repack-v*.tar.gz")).read_bytes()
    platforms = yaml.safe_load((out / "krew-manifest.yaml").read_text())["spec"]["platforms"]
    assert {p["sha256"] for p in platforms} == {hashlib.sha256(data).hexdigest()}
    return data


def _zip_members(archive_bytes):
    import io
    import tarfile
    with tarfile.open(fileobj=io.BytesIO(archive_bytes)) as tar:
        zipapp = tar.extractfile("kubectl-repack").read()
    with zipfile.ZipFile(io.BytesIO(zipapp)) as z:
        return {name: z.read(name) for name in z.namelist()}


def test_archive_is_the_same_bytes_from_any_interpreter_and_any_cache_state(tmp_path):
    """Cold caches filled by the interpreter running the tests and by a fresh venv (another
    interpreter path, so other console-script shebangs), then each cache reused by the other
    interpreter, then a cache whose tree was changed after it was made: one archive, bytes equal.
    Then nothing of the build host is inside: no bin/, no ../ RECORD line, no path of either
    interpreter or of the caches, and every RECORD lists exactly the bytes its files hold."""
    venv = tmp_path / "venv with space"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    other = venv / "bin" / "python"
    cold_here, cold_there = tmp_path / "cache-here", tmp_path / "cache-there"
    builds = {
        "cold, this interpreter": _build(sys.executable, cold_here, tmp_path / "a"),
        "cold, a fresh venv": _build(other, cold_there, tmp_path / "b"),
        "venv on this interpreter's cache": _build(other, cold_here, tmp_path / "c"),
        "this interpreter on the venv's cache": _build(sys.executable, cold_there, tmp_path / "d"),
    }
    # A cache changed after it was made (a half-written or hand-edited tree) is rebuilt, not used.
    (vendored,) = cold_here.glob("vendor-*")
    (vendored / "idna" / "__init__.py").write_text("# edited\n")
    builds["this interpreter on an edited cache"] = _build(sys.executable, cold_here, tmp_path / "e")
    digests = {how: hashlib.sha256(data).hexdigest() for how, data in builds.items()}
    assert len(set(digests.values())) == 1, digests

    members = _zip_members(builds["cold, this interpreter"])
    assert not [n for n in members if n.startswith("bin/")]
    host = [str(p).encode() for p in (Path(sys.executable).resolve().parent, venv, tmp_path)]
    for name, data in members.items():
        assert not [h for h in host if h in data], name
    records = [n for n in members if n.endswith(".dist-info/RECORD")]
    assert len(records) > 10
    release = load_release()
    for record in records:
        lines = members[record].decode().splitlines()
        assert lines[-1] == f"{record},,"
        for line in lines[:-1]:
            path, digest, size = line.split(",")
            assert not path.startswith(("../", "/")) and path in members, (record, line)
            assert (digest, int(size)) == (release.record_hash(members[path]), len(members[path])), (record, line)
