#!/usr/bin/env bash
# Regenerates hack/image/requirements.txt: the wheels of setup.py's requirements plus the
# `webhook` extra, for CPython 3.11 (Debian bookworm's) on linux/amd64 and linux/arm64, each pinned
# with the hashes of both platforms' wheels. Versions come from constraints.txt (the one pin set
# of the pip install, the tests and the krew zipapp), or from the constraints file given.
#   bash hack/image/lock.sh [CONSTRAINTS]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${PYTHON:-python3}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
reqs="$("$PY" - "$HERE/../../setup.py" <<'PYEOF'
import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in ("install_requires", "extras_require")}
print(" ".join(kw["install_requires"] + kw["extras_require"]["webhook"]))
PYEOF
)"
constraint=(-c "${1:-$HERE/../../constraints.txt}")
for plat in manylinux2014_x86_64 manylinux2014_aarch64; do
  # shellcheck disable=SC2086
  "$PY" -m pip download --quiet --only-binary=:all: --platform "$plat" --python-version 3.11 \
    --implementation cp --abi cp311 "${constraint[@]}" -d "$tmp/$plat" $reqs
done
"$PY" - "$tmp" "$HERE/requirements.txt" <<'PYEOF'
import collections, hashlib, os, re, sys
tmp, out = sys.argv[1:]
pins = collections.defaultdict(set)
for plat in sorted(os.listdir(tmp)):
    for f in sorted(os.listdir(os.path.join(tmp, plat))):
        name, version = f.split("-")[:2]
        digest = hashlib.sha256(open(os.path.join(tmp, plat, f), "rb").read()).hexdigest()
        pins[(re.sub(r"[-_.]+", "-", name).lower(), version)].add(digest)
names = collections.Counter(n for n, _ in pins)
clash = [n for n, c in names.items() if c > 1]
if clash:
    sys.exit(f"the two platforms resolved different versions of {clash}; pass a constraints file")
lines = ["# The image's Python dependencies, pinned with their hashes for linux/amd64 and linux/arm64",
         "# (CPython 3.11, Debian bookworm's). hack/build-image.sh downloads exactly these wheels on the",
         "# host and the Containerfile installs them with --no-index. Regenerate with",
         "# `bash hack/image/lock.sh` after changing setup.py's requirements.", ""]
for (name, version), hashes in sorted(pins.items()):
    hashes = sorted(hashes)
    lines.append(f"{name}=={version} \\")
    lines += [f"    --hash=sha256:{h}" + (" \\" if i < len(hashes) - 1 else "") for i, h in enumerate(hashes)]
open(out, "w").write("\n".join(lines) + "\n")
print(f"wrote {out}: {len(pins)} packages")
PYEOF
