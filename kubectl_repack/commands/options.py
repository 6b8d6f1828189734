"""The flags every command shares, defined once (DESIGN convention 9), and the run-wide settings.

`--kubeconfig` and `--context` are accepted both before the command (`kubectl repack --context x
plan`) and after it (`kubectl repack plan --context x`), as kubectl users type them; the value
closest to the command wins. `-o/--output` is per command because the formats differ.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import click

from kubectl_repack.api.installed import NAMESPACE as DEFAULT_REPACK_NAMESPACE
from kubectl_repack.api.installed import NAMESPACE_ENV

OUTPUT_YAML, OUTPUT_JSON, OUTPUT_WIDE = "yaml", "json", "wide"
# spec.mode, as kubectl_repack.api.run names it: spelled again here because api.run loads the planner,
# which `--help` and every TAB must not (tests/unit/cli/test_startup.py checks that both agree).
MODE_DRY_RUN, MODE_EXECUTE = "DryRun", "Execute"
NOW_ENV = "REPACK_NOW"
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


@dataclass
class Settings:
    """What the shared flags decided; one per invocation, in click's ctx.obj."""
    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    server: Optional[str] = None
    token: Optional[str] = None
    insecure_skip_tls_verify: bool = False
    as_user: Optional[str] = None
    as_group: tuple = ()
    request_timeout: Optional[float] = None
    _api: object = None

    def api(self):
        """The ApiClient for these settings, connected on first use (never for offline runs)."""
        if self._api is None:
            from kubectl_repack.kube import client

            if self.as_group and not self.as_user:  # as kubectl, before anything is sent
                raise click.UsageError("--as-group needs --as: groups are impersonated together with a user")

            self._api = client.connect(self.kubeconfig, self.context, client.Overrides(
                server=self.server, token=self.token, insecure=self.insecure_skip_tls_verify,
                as_user=self.as_user, as_groups=tuple(self.as_group), request_timeout=self.request_timeout))
        return self._api


def settings(ctx: Optional[click.Context] = None) -> Settings:
    """The Settings of this invocation (shared by the group and the command)."""
    ctx = ctx or click.get_current_context()
    return ctx.ensure_object(Settings)


class _Checked(click.ParamType):
    """A string flag checked by a function returning what is wrong with a value ("" if nothing)."""

    def __init__(self, name: str, problem):
        self.name = name
        self.problem = problem

    def convert(self, value, param, ctx):
        why = self.problem(value)
        if why:
            self.fail(why, param, ctx)
        return value


def _name_problem(value):
    from kubectl_repack import schema
    return schema.name_problem(value)


def _label_problem(value):
    from kubectl_repack import schema
    return schema.label_problem(value)


# An image reference as the container runtime parses it: [host[:port]/]path[:tag][@sha256:digest];
# the first component is a registry host only if it has a dot or a port, or is localhost.
_IMAGE_REF = re.compile(
    r"^(?:(?:[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)+(?::[0-9]+)?|[a-zA-Z0-9-]+:[0-9]+|localhost)/)?"  # registry
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"  # path
    r"(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$")


def _image_problem(value):
    if not _IMAGE_REF.match(value):
        return (f"{value!r} is not an image reference (REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST], e.g. "
                "registry.example/repack-webhook:0.1.0); a digest is sha256:<64 lowercase hex digits>")
    return ""


class IntRange(click.IntRange):
    """click.IntRange over ASCII digits only: Python's int() also reads '９' (fullwidth) as 9,
    which no shell user means and kubectl refuses."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not re.fullmatch(r"[+-]?[0-9]+", value.strip()):
            self.fail(f"{value!r} is not a valid integer.", param, ctx)
        return super().convert(value, param, ctx)


RUN_NAME = _Checked("NAME", _name_problem)     # any object named by an RFC 1123 subdomain
NAMESPACE = _Checked("NAMESPACE", _label_problem)
IMAGE_REF = _Checked("IMAGE", _image_problem)


def repack_namespace_option(*aliases: str):
    """--repack-namespace: where the product lives (what install puts there: the webhook, the
    coordinator, the controller and their Leases, among them the execute mutex), one rule for every
    command that needs it: the flag, else $REPACK_NAMESPACE, else repack-system. `aliases` are the
    older spellings a command keeps (install and uninstall: --namespace). Never -n: kubectl's -n is
    the namespace of an object named on the command line, and the product's namespace is not one."""
    return click.option("--repack-namespace", *aliases, "repack_namespace", type=NAMESPACE, metavar="NAMESPACE",
                        default=DEFAULT_REPACK_NAMESPACE, envvar=NAMESPACE_ENV, show_default=True, show_envvar=True,
                        help="Namespace of the in-cluster parts (webhook, coordinator, controller) and their "
                             "Leases.")


def _remember(ctx, param, value):
    if value is not None:
        setattr(settings(ctx), param.name, value)
    return value


def _server_url(ctx, param, value):
    if value is not None:
        from urllib.parse import urlparse

        url = urlparse(value if "://" in value else f"https://{value}")
        try:
            url.port  # noqa: B018 - raises ValueError on a port that is not a number
        except ValueError:
            url = url._replace(netloc="")
        if url.scheme not in ("https", "http") or not url.hostname:
            raise click.BadParameter(f"{value!r} is not an API server address such as https://10.0.0.1:6443",
                                     ctx=ctx, param=param)
        value = url.geturl()
    return _remember(ctx, param, value)


def _groups(ctx, param, value):
    if value:  # every group given, each sent as its own header; as for the other flags, the
        settings(ctx).as_group = tuple(value)  # groups given after the command win over those before
    return value


def _request_timeout(ctx, param, value):
    """kubectl's --request-timeout: whole seconds ("30") or a duration ("30s", "1m"); 0 = none."""
    if value is None:
        return None
    from kubectl_repack.api.times import parse_duration

    try:
        seconds = parse_duration(value).total_seconds()
    except (ValueError, OverflowError) as e:
        raise click.BadParameter(
            f"{value!r}: a timeout is a single integer in seconds, or an integer followed by a unit "
            "(e.g. 1s | 2m | 3h); 0 waits as long as it takes", ctx=ctx, param=param) from e
    settings(ctx).request_timeout = seconds
    return seconds


def cluster_options(f):
    """kubectl's connection flags: --kubeconfig, --context, --server, --token,
    --insecure-skip-tls-verify, --as, --as-group, --request-timeout (stored in Settings, not passed
    to the command)."""
    f = click.option("--request-timeout", "request_timeout", metavar="DURATION", callback=_request_timeout,
                     expose_value=False, is_eager=True,
                     help="How long to wait for each API server request before giving up: whole seconds "
                          "or a duration (30s, 1m); 0 means no limit. Default: 60s.")(f)
    f = click.option("--as-group", "as_group", metavar="GROUP", multiple=True, callback=_groups,
                     expose_value=False, is_eager=True,
                     help="Group to impersonate for the operation (with --as); repeat for several.")(f)
    f = click.option("--as", "as_user", metavar="USER", callback=_remember, expose_value=False, is_eager=True,
                     help="Username to impersonate for the operation (a user or a service account).")(f)
    f = click.option("--insecure-skip-tls-verify", "insecure_skip_tls_verify", is_flag=True, default=None,
                     callback=_remember, expose_value=False, is_eager=True,
                     help="Do not check the API server's certificate (insecure).")(f)
    f = click.option("--token", metavar="TOKEN", callback=_remember, expose_value=False, is_eager=True,
                     help="Bearer token for authentication to the API server.")(f)
    f = click.option("--server", "-s", "server", metavar="URL", callback=_server_url, expose_value=False,
                     is_eager=True, help="The address and port of the Kubernetes API server.")(f)
    f = click.option("--context", metavar="NAME", callback=_remember, expose_value=False, is_eager=True,
                     help="The kubeconfig context to use.")(f)
    f = click.option("--kubeconfig", metavar="FILE", callback=_remember, expose_value=False, is_eager=True,
                     type=click.Path(dir_okay=False),
                     help="Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).")(f)
    return f


@dataclass(frozen=True)
class Template:
    """-o jsonpath=..., jsonpath-as-json=... or custom-columns=...: kubectl's templated printers."""
    kind: str
    template: str


TEMPLATE_KINDS = ("jsonpath", "jsonpath-as-json", "custom-columns")
OUTPUT_NAME = "name"


class _Output(click.ParamType):
    """-o as kubectl takes it: one of the command's formats, or KIND=TEMPLATE (kubectl also takes
    `-o jsonpath TEMPLATE`-less forms only with '='; a missing template is refused)."""
    name = "FORMAT"

    def __init__(self, choices, templates: bool):
        self.choices = tuple(choices)
        self.templates = templates

    def convert(self, value, param, ctx):
        if isinstance(value, Template) or value in self.choices:
            return value
        kind, sep, template = str(value).partition("=")
        if self.templates and kind in TEMPLATE_KINDS:
            from kubectl_repack import printing as output

            if not sep or not template:
                self.fail(f"{kind} needs a template: -o {kind}=TEMPLATE", param, ctx)
            try:
                output.check_template(kind, template)
            except output.JSONPathError as e:
                self.fail(str(e), param, ctx)
            return Template(kind, template)
        allowed = list(self.choices) + ([f"{k}=..." for k in TEMPLATE_KINDS] if self.templates else [])
        self.fail(f"{value!r} is not one of {', '.join(repr(a) for a in allowed)}", param, ctx)

    def shell_complete(self, ctx, param, incomplete):
        from click.shell_completion import CompletionItem

        options = list(self.choices) + ([f"{k}=" for k in TEMPLATE_KINDS] if self.templates else [])
        return [CompletionItem(o) for o in options if o.startswith(incomplete)]


def output_option(*choices, help_text: str, templates: bool = False):
    """-o/--output with the given formats (and with `templates`, -o name, jsonpath=,
    jsonpath-as-json= and custom-columns= as kubectl prints them); absent means the summary."""
    if templates:
        choices = choices + (OUTPUT_NAME,)
    return click.option("-o", "--output", type=_Output(choices, templates), default=None, help=help_text)


def template_options(f):
    """--allow-missing-template-keys, as kubectl's (default true) for -o jsonpath=."""
    return click.option("--allow-missing-template-keys", "allow_missing", default=True, show_default=True,
                        type=bool, help="With -o jsonpath=: print nothing for a missing key instead of failing.")(f)


def _gang_ref_problem(value):
    """What is wrong with a --for/why KIND/NAME ("" if nothing): a kind planner.relief knows, a name."""
    from planner.relief import KIND_ALIASES
    kind, _, name = value.partition("/")
    if kind.lower() not in KIND_ALIASES or not name or "/" in name:
        return f"{value!r}: expected KIND/NAME with KIND vcjob, podgroup or pod"
    return _name_problem(name)


GANG_REF = _Checked("KIND/NAME", _gang_ref_problem)


def target_options(f):
    """--for KIND/NAME and -n/--namespace (kubectl's: the namespace of that object): a run aimed at
    a pending gang (spec.target, RELIEF-2). The PodGroup is resolved from the snapshot the command
    reads (`planner.relief.resolve_gang`)."""
    f = click.option("-n", "--namespace", "for_namespace_flag", type=NAMESPACE, metavar="NAMESPACE", default=None,
                     help="The namespace of the --for object, as kubectl's -n (default: the kubeconfig "
                          "context's, else default).")(f)
    return click.option("--for", "for_ref", type=GANG_REF, metavar="KIND/NAME", default=None,
                        help="Make room for this pending gang (vcjob/NAME, podgroup/NAME or pod/NAME): "
                             "the least-disruptive moves after which all its pods fit, nothing more "
                             "(spec.target; the resource is the one it requests unless --resource names one).")(f)


def for_namespace(namespace, offline: bool) -> str:
    """-n as kubectl takes it: given, else the kubeconfig context's namespace (live), else default."""
    if namespace:
        return namespace
    if offline:
        return "default"
    from kubectl_repack.kube import client
    s = settings()
    return client.context_namespace(s.kubeconfig, s.context) or "default"


def mode_option(mode: str, help_text: str):
    """--mode: replaces the run file's spec.mode with the one mode the command takes (plan: DryRun,
    apply: Execute), through QuickFlags.mode like the other overriding flags."""
    return click.option("--mode", type=click.Choice([mode]), help=help_text)


def _check_now(ctx, param, value):
    if value is None:
        return None
    from kubectl_repack.api.times import parse_time

    if not _RFC3339.match(value) or parse_time(value) is None:  # the pattern, and a real date
        raise click.BadParameter(f"{value!r} is not an RFC 3339 time such as 2026-07-30T08:00:00Z",
                                 ctx=ctx, param=param)
    return value


def now_option(f):
    """--now (or $REPACK_NOW): the time the command stamps on what it writes (start, completion,
    conditions, the generated run name), so one snapshot and spec give the same bytes: a plan kept
    in Git, or two plans compared, differ only where the cluster does."""
    return click.option("--now", envvar=NOW_ENV, callback=_check_now, metavar="TIME",
                        help="Stamp TIME (RFC 3339, e.g. 2026-07-30T08:00:00Z) instead of the current time on "
                             "what the plan writes, for reproducible output.")(f)


def now_or_current(now: Optional[str]) -> str:
    """The pinned time, or the current UTC time, as RFC 3339 with seconds."""
    if now:
        return now
    from kubectl_repack.api.times import rfc3339, utcnow

    return rfc3339(utcnow())


def stamp(now: str) -> str:
    """A name-safe compact form of an RFC 3339 time: 20260730-080000."""
    digits = re.sub(r"[^0-9]", "", now[:19])
    return f"{digits[:8]}-{digits[8:14]}"


__all__ = ["GANG_REF", "target_options", "for_namespace", "Template", "TEMPLATE_KINDS", "OUTPUT_NAME", "template_options", "mode_option", "IntRange", "RUN_NAME", "NAMESPACE", "IMAGE_REF", "repack_namespace_option", "Settings", "settings", "cluster_options", "output_option", "now_option", "now_or_current",
           "stamp", "OUTPUT_YAML", "OUTPUT_JSON", "OUTPUT_WIDE", "NOW_ENV"]


def duration(ctx, param, value):
    """click callback: a duration flag ("30s", "10m", "1h30m") as a timedelta; usage error otherwise."""
    from kubectl_repack.api.times import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except (ValueError, OverflowError) as e:  # OverflowError: more days than a timedelta holds
        raise click.BadParameter(str(e) if isinstance(e, ValueError) else f"{value!r} is too long a duration",
                                 ctx=ctx, param=param) from e


def terminal_width() -> Optional[int]:
    """Columns the human output may use: $COLUMNS when set (a positive number), else the width of
    the terminal stdout is, else None (a pipe or a file: lines are kept whole, as kubectl does)."""
    import os
    import sys

    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        if sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns or None
    except (OSError, ValueError, AttributeError):
        pass
    return None
