"""kubectl-repack: the kubectl plugin, and the run API, Kubernetes I/O and execution engine it
shares with the in-cluster webhook process (see the README's Layout section)."""

# The one place the version is written: setup.py reads it from here, `--version` prints it, and
# hack/release.py writes the krew manifest for version `v` + this.
__version__ = "0.1.0"
