#!/usr/bin/env bash
# Writes the user-visible outputs a refactoring must leave byte-identical into DIR: the CRD and the
# config/ manifests, `install`/`uninstall --dry-run -o yaml`, and `plan` of every bundled snapshot
# with every bundled spec in every output format (errors included, with their exit codes).
#
#     bash hack/golden-outputs.sh /tmp/before      # on the commit before
#     bash hack/golden-outputs.sh /tmp/after       # on the commit after
#     diff -r /tmp/before /tmp/after               # no output: nothing a user sees changed
#
# GOLDEN_TREE=<worktree> with PYTHONPATH=<worktree> runs another checkout (e.g. `git worktree add`
# of the commit before) with this script.
set -u
out=${1:?usage: golden-outputs.sh DIR}
mkdir -p "$out"
cd "${GOLDEN_TREE:-$(dirname "$0")/..}"
# The times a plan stamps (start, completion, transitions) are the clock's, not the program's: masked.
run() {
  local name=$1; shift
  "$@" > "$out/$name" 2>&1; echo "exit $?" >> "$out/$name"
  sed -i -E 's/(Time["'"'"']?: *["'"'"']?)[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z/\1<time>/g' "$out/$name"
}
cp config/crd/repack.volcano.sh_repackruns.yaml "$out/crd.yaml"
for f in config/webhook/*.yaml; do cp "$f" "$out/config-webhook-$(basename "$f")"; done
run install.yaml kubectl-repack install --dry-run -o yaml
run install-no-network-policy.yaml kubectl-repack install --dry-run -o yaml --no-network-policy
run uninstall.yaml kubectl-repack uninstall --dry-run -o yaml
for snapshot in examples/*.yaml examples/*.json; do
  case $snapshot in *dryrun*) continue;; esac
  for spec in examples/*dryrun*.yaml config/samples/*.yaml; do
    for format in yaml json wide table; do
      flags=(); [ "$format" = table ] || flags=(-o "$format")
      run "plan-$(basename "$snapshot")-$(basename "$spec")-$format" \
        kubectl-repack plan --snapshot "$snapshot" -f "$spec" "${flags[@]}"
    done
  done
done
for command in plan apply status snapshot install uninstall doctor cancel; do
  run "help-$command" kubectl-repack "$command" --help
done
