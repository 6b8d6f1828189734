"""Hostile command lines, generated from the commands themselves: for every option of every
`kubectl repack` command (found by walking the click group, so a new option is covered as soon as
it exists), values of the wrong type, out of range, not among the choices, or malformed for what
the option means (durations, names, selectors, quantities, URLs, paths). Plus unknown flags, a
missing value and unknown commands. Each must be refused by the one oracle before anything
reaches a cluster: exit 2, `error:` naming the flag or field, no traceback, no cluster call.
"""
from __future__ import annotations

import re

import click
import pytest

from kubectl_repack.cli import main

from .oracle import assert_refused, invoke, recorder  # noqa: F401 - fixture

R = "huawei.com/ascend-1980"
SEED = "examples/seed-3-nodes.yaml"
EXECUTE = "config/samples/ascend-execute-001.yaml"

# The least each command needs to get past its own argument checks.
BASE_ARGS = {
    "plan": ["--snapshot", SEED, "--resource", R],
    "apply": ["-f", EXECUTE],
    "status": ["some-run"],
    "cancel": ["some-run"],
    "doctor": [],
    "snapshot": ["-o", "/tmp/repack-hostile-snapshot.json"],
    "install": ["--dry-run"],
    "uninstall": ["--dry-run"],
    "completion": ["bash"],
    "version": [],
    "why": ["vcjob/ascend-batch-training", "-n", "repack-demo", "--snapshot", SEED],
    # the subcommands of `policy` (POLICY-1, POLICY-2), named "GROUP SUBCOMMAND"
    "policy create": ["-f", "config/samples/ascend-nightly-policy.yaml"],
    "policy get": [],
    "policy suspend": ["some-policy"],
    "policy resume": ["some-policy"],
    "policy trigger": ["some-policy"],
    # the history is read only after every flag is checked
    "simulate": ["-f", "config/samples/ascend-nightly-policy.yaml", "--history", "/nonexistent/history.csv",
                 "--snapshot", SEED],
}

DNS_NAMES = ["Bad_Name", "-leading-dash", "a" * 254, "has space", "UPPER", "a..b", "ends-", "x/y", ""]
DNS_LABELS = ["Bad_NS", "-x", "a" * 64, "has.dot", "UPPER", "ends-", "x/y", ""]
DURATIONS = ["abc", "-5m", "5 minutes", "1.5.3s", "5x", "", "99999999999999999999h", "h", "1h-5m", "5 m"]
SELECTORS = ["a in (b", "=x", "a=b=c", "!", "a,,b", "a notin b", "a in ()", "bad key!=v", "a in b)",
             "(a)", "a=" + "v" * 64]
QUANTITIES = ["lots", "-1", "8 cards", "2GB", "", "1e99999"]
# Values an option of this meaning must refuse, by its long name.
BY_NAME = {
    "--timeout": DURATIONS, "--request-timeout": DURATIONS + ["-1", "1.5"], "--cooldown": DURATIONS, "--eviction-retry-timeout": DURATIONS,
    "--name": DNS_NAMES, "--resume": DNS_NAMES,
    "--filename": ["/nonexistent/run.yaml", ""],
    "--resource": ["cpu", "nvidia", ""],
    "--max-cards": QUANTITIES,
    "--podgroup-selector": SELECTORS, "--exclude-podgroup-selector": SELECTORS,
    "--node-selector": SELECTORS, "--exclude-node-selector": SELECTORS,
    "--now": ["yesterday", "2026-13-01T00:00:00Z", ""],
    "--repack-namespace": DNS_LABELS, "--namespace": DNS_LABELS,
    "--for": ["deployment/x", "vcjob", "vcjob/", "pod/a/b", "podgroup/Bad_Name", ""],
    "--image": ["", "has space:1", "UPPER/case:tag", "repo:tag:extra", "repo@sha256:short"],
    "--webhook-url": ["http://insecure.example:8443/mutate", "not a url", "https://", ""],
    "--snapshot": ["/nonexistent/snapshot.json"],
    "--cert-dir": ["/etc/hostname"],  # a file, not a directory
    "--output": ["/nonexistent-dir/snapshot.json"],
    "--allow-missing-template-keys": ["maybe", "2", "yesno"],
    "--server": ["ftp://10.0.0.1", "https://", "http://:6443", "https://host:port"],
    "--tolerations": ["=v", "k:Sometimes", "[{\"key\": 1, \"bogus\": 2}]", "[{\"k\": 1, \"k\": 2}]", "[1]",
                      "[" * 100 + "]" * 100],
    "--priority-class": DNS_NAMES,
    "--apiserver-cidr": ["bogus", "10.0.0.300/8", "10.0.0.0/33", "fd00::/129", ""],
    "--replacement-creator": ["", "a,b", " padded", "line\nbreak", "nul\x00", "x" * 1025],
    # simulate's replay settings and its job history
    "--load": ["0", "-1", "lots", "", "1,5"], "--days": ["0", "-2", "a week", ""], "--warmup-days": ["-1", "x", ""],
    "--history": ["/nonexistent/history.csv", ""],  # snapshot -o is a file, the others a Choice
}
# Options whose every string is acceptable syntax; what they name is only known when the cluster is
# reached (like kubectl, a missing --kubeconfig is an error of the connection, exit 1, and offline
# commands never read it).
# The same for credentials and identities (--token, --as, --as-group).
FREE = {"--context", "--kubeconfig", "--token", "--as", "--as-group"}
STATUS_NAMES = DNS_NAMES


def _long(option):
    return max(option.opts, key=len)


def _bad_values(option):
    kind = option.type
    if getattr(kind, "templates", False):  # -o with kubectl's templated printers
        return ["bogus", "", "YAMLx", "jsonpath", "jsonpath=", "jsonpath={.a[}", "jsonpath={.a",
                "custom-columns=", "custom-columns=NAME", "custom-columns=A:{.a[}", "go-template={{.x}}"]
    if isinstance(kind, click.Choice):
        return ["bogus", "", kind.choices[0].upper() + "x", f"{kind.choices[0]},{kind.choices[-1]}"]
    if isinstance(kind, click.IntRange):
        values = ["abc", "1.5", "", "0x10", "1e3", "９"]
        if kind.min is not None:
            values.append(str(kind.min - 1))
        if kind.max is not None:
            values.append(str(kind.max + 1))
        return values
    if isinstance(kind, click.types.IntParamType):
        return ["abc", "1.5", ""]
    return BY_NAME.get(_long(option))


def _commands():
    """(name, command) of every command, a group's subcommands as "GROUP SUBCOMMAND"."""
    for name, command in sorted(main.commands.items()):
        if isinstance(command, click.Group):
            for sub, subcommand in sorted(command.commands.items()):
                yield f"{name} {sub}", subcommand
        else:
            yield name, command


def _command(name):
    return dict(_commands())[name]


def _cases():
    for name, command in _commands():
        if command.hidden:  # `__complete` takes whatever words kubectl passes: that is its protocol
            continue
        for option in command.params:
            if not isinstance(option, click.Option) or option.is_flag or _long(option) in FREE:
                continue
            values = _bad_values(option)
            if values is None:
                yield pytest.param(name, _long(option), None, id=f"{name} {_long(option)} (no cases)")
                continue
            if name == "snapshot" and _long(option) == "--output":
                values = BY_NAME["--output"]
            for n, value in enumerate(values):
                yield pytest.param(name, _long(option), value, id=f"{name} {_long(option)}={value[:16]!r}#{n}")
        yield pytest.param(name, "--no-such-flag", "x", id=f"{name} --no-such-flag")
    for command in ("status", "cancel", "policy get", "policy suspend", "policy resume", "policy trigger"):
        for n, value in enumerate(STATUS_NAMES):
            yield pytest.param(command, None, value, id=f"{command} NAME={value[:16]!r}#{n}")


CASES = list(_cases())


def test_there_are_hundreds_of_cases():
    assert len(CASES) >= 150


@pytest.mark.parametrize("command, flag, value", CASES)
def test_bad_flag_is_refused_before_any_cluster_call(recorder, command, flag, value):
    assert value is not None, f"{command} {flag}: no hostile values are known; add them to BY_NAME"
    if flag is None:  # the positional NAME of status
        args = [*command.split(), "--", value]
    else:
        args = [*command.split(), *BASE_ARGS[command], flag, value]
    r = invoke(args)
    option = next((p for p in _command(command).params if flag in getattr(p, "opts", ())), None)
    shown = "|".join(re.escape(o) for o in (option.opts if option else [flag or "NAME"]))
    assert_refused(r, recorder, re.compile(rf"^error: .*({shown}|{re.escape(value[:40]) if value else '$^'}|spec\.|metadata\.)"))


@pytest.mark.parametrize("args", [
    ["no-such-command"], ["plan", "--snapshot"], ["plan", "--resource"], ["--no-such-global"],
    ["status"], ["status", "a", "b"], ["plan", "--snapshot", SEED, "extra-argument", "--resource", R],
], ids=lambda a: " ".join(a))
def test_malformed_command_lines_are_refused(recorder, args):
    r = invoke(args)
    assert_refused(r, recorder, re.compile(r"^error: "))
    assert "Usage:" not in r.stderr.splitlines()[0]
