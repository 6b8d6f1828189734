#!/usr/bin/env python3
"""Build the krew release of kubectl-repack: the archive and, next to it, the krew manifest naming its sha256.

The archive holds one self-contained zipapp, `kubectl-repack`, runnable by any `python3` >= 3.10
on Linux and macOS, amd64 and arm64 alike: the pure-Python packages `planner` and `kubectl_repack`
plus their dependencies vendored with `pip install --target`. Compiled extension modules are
removed after vendoring; every dependency chosen here has a pure-Python fallback (PyYAML,
pyrsistent, charset-normalizer), and the build fails if anything compiled is left. Two pins keep
the set pure: jsonschema < 4.18 (later versions need the compiled rpds-py) and kubernetes < 36
(36 pulls aiohttp, 37 pydantic-core). The webhook is not part of the plugin.

The vendored set is the one in constraints.txt, the same pins the pip install and the tests use,
so the zipapp runs exactly the library versions CI tested. The build is reproducible on any machine,
with any interpreter, with a cold or a warm cache: what pip writes that depends on the build host
(console scripts under bin/, whose shebang names the interpreter, and their lines in each RECORD) is
dropped, every RECORD is rewritten from the files the archive really holds, files are sorted and
carry fixed timestamps and modes. The vendor cache (~/.cache/kubectl-repack/release, never in the
repository) is keyed on everything that decides its content: the requirements, constraints.txt,
the target Python, pip's version and this script's vendoring format; a cached tree whose content
digest no longer matches the one recorded when it was made is rebuilt.

The manifest is written for the version being released (v + kubectl_repack.__version__) from the
committed template hack/krew-manifest.template.yaml, which names no sha256: no commit carries a
digest of its own tree, so a code change never needs a manifest change. Submit dist/krew-manifest.yaml
to krew-index (as plugins/repack.yaml) once the archive is uploaded at the manifest's uri.

    python3 hack/release.py                   # dist/kubectl-repack-v0.1.0.tar.gz and dist/krew-manifest.yaml
    python3 hack/release.py --dist /tmp/d     # the same into /tmp/d
"""
import argparse
import base64
import csv
import gzip
import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("planner", "kubectl_repack")
ENTRY_MODULE, ENTRY_FUNCTION = "kubectl_repack.cli", "main"
BIN = "kubectl-repack"
EXTRA_FILES = ("LICENSE", "README.md")
MIN_PYTHON = (3, 10)
REQUIREMENTS = (
    "click>=8.1",
    "PyYAML>=6.0",
    "jsonschema>=4.17,<4.18",
    "kubernetes>=29.0.0,<36",
    "durationpy>=0.7",
    "croniter>=7.0",
)
CONSTRAINTS = REPO / "constraints.txt"
COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # earliest a zip entry can carry
TEMPLATE = REPO / "hack" / "krew-manifest.template.yaml"
MANIFEST_NAME = "krew-manifest.yaml"  # krew-index files it as plugins/repack.yaml
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kubectl-repack" / "release"

MAIN_PY = f'''"""Entry point of the kubectl-repack zipapp."""
import sys

if sys.version_info < {MIN_PYTHON!r}:
    sys.exit("kubectl-repack needs Python >= {".".join(map(str, MIN_PYTHON))}, this is "
             + sys.version.split()[0])

from {ENTRY_MODULE} import {ENTRY_FUNCTION}

sys.exit({ENTRY_FUNCTION}())
'''


def release_version():
    """v + kubectl_repack.__version__, read from the source (the build may run on another interpreter)."""
    text = (REPO / "kubectl_repack" / "__init__.py").read_text()
    return "v" + re.search(r'(?m)^__version__ = "([^"]+)"$', text).group(1)


def _ignore_junk(_directory, names):
    return [n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))]


# Bump when what vendor() keeps or how normalise_vendored() rewrites it changes: old caches are then ignored.
VENDOR_FORMAT = 2
# Per-install files that record how pip was asked, not what was installed.
INSTALL_ONLY = ("REQUESTED", "direct_url.json")


def vendor_key(pip_version):
    """Digest of everything that decides the vendored tree's content."""
    parts = REQUIREMENTS + (f"py{MIN_PYTHON}", f"pip {pip_version}", f"format {VENDOR_FORMAT}",
                            CONSTRAINTS.read_text())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def record_hash(data):
    """A RECORD hash field as the wheel spec writes it: urlsafe base64 of the sha256, unpadded."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def normalise_vendored(root):
    """Make a `pip install --target` tree independent of the host that ran it.

    pip writes console scripts into bin/ with a shebang naming its interpreter, and lists them
    (with their hash) in RECORD as ../../bin/NAME. The zipapp has no bin/, so both go; compiled
    modules go too (see the module docstring). Each RECORD is then rewritten to list exactly the
    files of its distribution that remain, hashed from their bytes, sorted."""
    shutil.rmtree(root / "bin", ignore_errors=True)
    for path in sorted(root.rglob("*")):
        if path.is_file() and (path.suffix in COMPILED_SUFFIXES or ".so." in path.name):
            path.unlink()
        elif path.is_dir() and path.name == "__pycache__":
            shutil.rmtree(path)
    for info in sorted(root.glob("*.dist-info")):
        for name in INSTALL_ONLY:
            (info / name).unlink(missing_ok=True)
        record = info / "RECORD"
        own = record.relative_to(root).as_posix()
        rows = []
        for row in csv.reader(record.read_text().splitlines()):
            name = row[0] if row else ""
            path = root / name
            if not name or name == own or name.startswith(("/", "../")) or not path.is_file():
                continue
            data = path.read_bytes()
            rows.append((name, record_hash(data), str(len(data))))
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(sorted(rows) + [(own, "", "")])
        record.write_text(out.getvalue())


def tree_digest(root):
    """sha256 over the sorted relative paths and bytes of every file under root but .complete."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != ".complete"):
        data = path.read_bytes()
        digest.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def vendor(cache):
    """Pure-Python dependencies in a cached directory; built once per key (see vendor_key)."""
    from importlib.metadata import version
    target = cache / f"vendor-{vendor_key(version('pip'))}"
    complete = target / ".complete"
    if complete.exists() and complete.read_text().strip() == tree_digest(target):
        return target
    shutil.rmtree(target, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix="vendor-", dir=cache))
    # Resolve for the oldest supported Python so its conditional dependencies are included too.
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-warn-conflicts",
         "--root-user-action=ignore",
         "--no-compile", "--target", str(staging), "--cache-dir", str(cache / "pip"),
         "--python-version", ".".join(map(str, MIN_PYTHON)), "--only-binary=:all:",
         "--constraint", str(CONSTRAINTS), *REQUIREMENTS],
        check=True)
    normalise_vendored(staging)
    (staging / ".complete").write_text(tree_digest(staging) + "\n")
    staging.rename(target)
    return target


def stage_app(app, vendored):
    """Lay out the zipapp tree: vendored dependencies, our packages, __main__.py."""
    shutil.copytree(vendored, app, ignore=shutil.ignore_patterns(".complete", "__pycache__"))
    for package in PACKAGES:
        # symlinks=False: the packaged CRD is a symlink to config/crd; the zipapp gets its bytes.
        shutil.copytree(REPO / package, app / package, symlinks=False, ignore=_ignore_junk)
    (app / "__main__.py").write_text(MAIN_PY)
    compiled = [p for p in app.rglob("*") if p.suffix in COMPILED_SUFFIXES]
    if compiled:
        raise SystemExit(f"compiled modules would make the zipapp platform-bound: {compiled}")


def build_zipapp(app, target):
    """A zip with a python3 shebang, entries sorted and timestamps fixed (reproducible)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(app.rglob("*")):
            if path.is_dir():
                continue
            info = zipfile.ZipInfo(path.relative_to(app).as_posix(), date_time=FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            archive.writestr(info, path.read_bytes())
    target.write_bytes(b"#!/usr/bin/env python3\n" + buffer.getvalue())
    target.chmod(0o755)


def build_tarball(members, target):
    """tar.gz of (name, path) pairs, normalised so equal inputs give equal bytes: the plugin
    binary is 0755 and every other file 0644, whatever the checkout's permissions."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, path in sorted(members):
            info = tarfile.TarInfo(name)
            data = path.read_bytes()
            info.size, info.mtime, info.uid, info.gid = len(data), 0, 0, 0
            info.uname = info.gname = ""
            info.mode = 0o755 if name == BIN else 0o644
            archive.addfile(info, io.BytesIO(data))
    with open(target, "wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out,
                                                  mtime=0) as gz:
        gz.write(raw.getvalue())


def sha256_of(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_text(version, digest, file_names, template=TEMPLATE):
    """The krew manifest of `version`: the template with the version set, every platform's sha256
    set to `digest` and its files to `file_names`; the template's own comment lines replaced."""
    lines = template.read_text().splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    header = (f"# krew plugin manifest of kubectl-repack {version}, written by hack/release.py for the archive\n"
              f"# next to it (sha256 below). Edit hack/krew-manifest.template.yaml, not this file.\n")
    text = header + "".join(lines).replace("${version}", version)
    text, count = re.subn(r"(?m)^([ ]*sha256:[ ]*).*$", lambda m: f'{m.group(1)}"{digest}"', text)
    if count == 0:
        raise SystemExit(f"{template}: no sha256 field to set")

    def files_block(match):
        indent = match.group("indent")
        items = "".join(f'{indent}  - from: "{name}"\n{indent}    to: "."\n' for name in file_names)
        return f"{indent}files:\n{items}"

    # Each platform's files are what the archive holds (LICENSE once it exists).
    text = re.sub(r"(?m)^(?P<indent>[ ]*)files:\n(?:(?P=indent)[ ]+\S.*\n)*", files_block, text)
    parsed = yaml.safe_load(text)
    if parsed["spec"]["version"] != version or "${" in text:
        raise SystemExit(f"{template}: the version placeholder was not set everywhere")
    for platform in parsed["spec"]["platforms"]:
        if platform["sha256"] != digest or [f["from"] for f in platform["files"]] != file_names:
            raise SystemExit(f"{template}: could not set platform {platform['selector']}")
    return text


def build(dist, cache, version):
    """Build the archive into dist; (archive path, sha256, the manifest's file list)."""
    dist.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    archive = dist / f"kubectl-repack-{version}.tar.gz"
    with tempfile.TemporaryDirectory(prefix="kubectl-repack-release-") as scratch:
        scratch = Path(scratch)
        stage_app(scratch / "app", vendor(cache))
        build_zipapp(scratch / "app", scratch / BIN)
        members = [(BIN, scratch / BIN)]
        members += [(name, REPO / name) for name in EXTRA_FILES if (REPO / name).is_file()]
        build_tarball(members, archive)
    return archive, sha256_of(archive), [name for name, _ in members if name != "README.md"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, default=REPO / "dist",
                        help="where to write the archive and its krew manifest (default: dist/)")
    parser.add_argument("--cache", type=Path, default=CACHE, help="vendored packages cache")
    args = parser.parse_args(argv)

    version = release_version()
    archive, digest, file_names = build(args.dist, args.cache, version)
    manifest = args.dist / MANIFEST_NAME
    manifest.write_text(manifest_text(version, digest, file_names))
    print(f"{archive}  sha256 {digest}")
    print(f"{manifest}: krew manifest of {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
