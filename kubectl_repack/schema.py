"""Local validation of RepackRun objects against the CRD's own OpenAPI schema (API-1).

The CRD in config/crd/ is the one source of truth; kubectl_repack/data/repackruns-crd.yaml is a
symlink to it, so the plugin validates with exactly the schema the API server enforces, before
anything is sent. The schema is converted once into a jsonschema (Draft 7) document that behaves
like the API server for our purposes:

- unknown fields are errors (the server would prune them silently; for a user that is a typo
  that changes the meaning of the run, so we refuse it),
- ``x-kubernetes-int-or-string`` becomes ``anyOf: [integer, string]`` (its pattern applies to
  strings only, as on the server),
- the CEL rules that can be decided on a single object are mapped to jsonschema equivalents, and
  transition rules (``self == oldSelf``) are left to the server. A CEL rule with no known
  equivalent makes loading fail, so a schema change cannot silently weaken local validation.

Every error is one line ``<path>: <message>`` with a kubectl-style path
(``spec.goals[0].minFragImprovementPercent``, ``spec.maxPerRun.resources[nvidia.com/gpu]``),
sorted by path. Messages are built here rather than taken from jsonschema, so they do not change
with the jsonschema version (the release zipapp vendors an older, pure-Python one).
"""
import copy
import functools
import json
import numbers
import re
from importlib import resources

import yaml

from kubectl_repack.api.run import API_VERSION, GROUP, KIND, PLURAL
from kubectl_repack.errors import DocumentError, ValidationError
from planner import documents

CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_RESOURCE = "repackruns-crd.yaml"

ROOT = "(root)"
UNKNOWN_FIELD = "unknown field"
REQUIRED = "required field is missing"

_GOAL_BUDGET_RULE = ("!has(self.maxPerRun) || !has(self.maxPerRun.resources) || "
                     "self.maxPerRun.resources.all(r, has(self.goals) && "
                     "self.goals.exists(g, g.resource == r))")


def _budget_resources_are_goals(spec):
    """Paths (relative to spec) of maxPerRun.resources keys that no goal names."""
    if not isinstance(spec, dict) or not isinstance(spec.get("maxPerRun"), dict):
        return
    budget = spec["maxPerRun"].get("resources")
    if not isinstance(budget, dict):
        return
    goals = spec.get("goals") if isinstance(spec.get("goals"), list) else []
    named = {g.get("resource") for g in goals if isinstance(g, dict) and isinstance(g.get("resource"), str)}
    for resource in budget:
        if resource not in named:
            yield ("maxPerRun", "resources", resource)


def _no_threshold_with_target(spec):
    """goals[i].minFragImprovementPercent of a targeted run."""
    if isinstance(spec, dict) and "target" in spec and isinstance(spec.get("goals"), list):
        for i, g in enumerate(spec["goals"]):
            if isinstance(g, dict) and "minFragImprovementPercent" in g:
                yield ("goals", i, "minFragImprovementPercent")


def _no_blocks_with_target(spec):
    if isinstance(spec, dict) and "target" in spec and "networkTopology" in spec:
        yield ("networkTopology",)


# Cross-field CEL rules have no jsonschema keyword: evaluated by these functions (name -> check,
# yielding the paths, relative to the node the rule sits on, of what breaks the rule).
_CHECK = "x-repack-check"
CHECKS = {"budget-resources-are-goals": _budget_resources_are_goals, "no-threshold-with-target": _no_threshold_with_target, "no-blocks-with-target": _no_blocks_with_target}

# CEL rules of the CRD that one object decides on its own, with a jsonschema equivalent.
CEL_EQUIVALENTS = {
    _GOAL_BUDGET_RULE: {_CHECK: "budget-resources-are-goals"},
    "!has(self.target) || !has(self.goals) || self.goals.all(g, !has(g.minFragImprovementPercent))": {
        _CHECK: "no-threshold-with-target"},
    "!has(self.target) || !has(self.networkTopology)": {_CHECK: "no-blocks-with-target"},
    "self.contains('/')": {"pattern": "/"},
    "(has(self.hyperNodeTier) && !has(self.hyperNodeTierName)) || "
    "(!has(self.hyperNodeTier) && has(self.hyperNodeTierName))": {
        "oneOf": [{"required": ["hyperNodeTier"]}, {"required": ["hyperNodeTierName"]}],
    },
}
# ... and of the RepackPolicy CRD (kubectl_repack.policy_schema), made from this one.
POLICY_TRIGGER_RULE = "has(self.cronSchedule) || has(self.onFragAbovePercent) || has(self.onPendingBlocked)"
POLICY_NAME_MAX = 48   # kubectl_repack.api.policy.NAME_MAX: <policy>-<14 digits> is a run name and a label value
POLICY_NAME_RULE = f"self.metadata.name.size() <= {POLICY_NAME_MAX}"
CEL_EQUIVALENTS.update({
    POLICY_TRIGGER_RULE: {"anyOf": [{"required": ["cronSchedule"]}, {"required": ["onFragAbovePercent"]},
                                    {"required": ["onPendingBlocked"]}]},
    POLICY_NAME_RULE: {"properties": {"metadata": {"properties": {"name": {"maxLength": POLICY_NAME_MAX}}}}},
})
# Transition rules compare with the stored object; only the API server can evaluate them.
SERVER_ONLY_RULES = frozenset({"self == oldSelf"})

_MESSAGES = "x-repack-messages"
_SUBSCHEMA_MAPS = ("properties", "patternProperties")
_SUBSCHEMA_LISTS = ("anyOf", "allOf", "oneOf")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not")

# RFC 1123 subdomain, as Kubernetes requires for the names of cluster-scoped custom objects.
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_DNS1123_SUBDOMAIN_MAX = 253


def name_problem(name: str) -> str:
    """Why `name` is not a valid name of a RepackRun (an RFC 1123 subdomain), or "" if it is."""
    if len(name) > _DNS1123_SUBDOMAIN_MAX:
        return f"must be no more than {_DNS1123_SUBDOMAIN_MAX} characters"
    if not _DNS1123_SUBDOMAIN.match(name):
        return (f"{name!r} is not a valid name: a lowercase RFC 1123 subdomain consists of lower case "
                "alphanumeric characters, '-' or '.', and starts and ends with an alphanumeric character")
    return ""


def label_problem(name: str) -> str:
    """Why `name` is not an RFC 1123 label (e.g. a namespace name), or "" if it is."""
    if len(name) > 63:
        return "must be no more than 63 characters"
    if not re.fullmatch(_DNS1123_LABEL, name):
        return (f"{name!r} is not a valid name: a lowercase RFC 1123 label consists of lower case "
                "alphanumeric characters or '-', and starts and ends with an alphanumeric character")
    return ""


class UnsupportedRule(ValueError):
    """The CRD carries a CEL rule that local validation does not know how to evaluate."""


def _crd_resource():
    return resources.files("kubectl_repack").joinpath("data").joinpath(CRD_RESOURCE)


@functools.lru_cache(maxsize=1)
def _crd_cached():
    # libyaml's parser when PyYAML has it (8 ms here against 65 ms for the pure-Python one, paid by
    # every `plan` and `apply`); the pure-Python zipapp's PyYAML has only the latter. Our own file.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(_crd_resource().read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader


def load_crd():
    """The RepackRun CustomResourceDefinition as a dict (a fresh copy, safe to modify)."""
    return copy.deepcopy(_crd_cached())


def _served_schema(crd):
    for version in crd["spec"]["versions"]:
        if version["name"] == API_VERSION.split("/", 1)[1]:
            return version["schema"]["openAPIV3Schema"]
    raise LookupError(f"CRD {CRD_NAME} has no version {API_VERSION}")


def _convert(node):
    """One OpenAPI (structural) schema node -> the jsonschema node local validation uses."""
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "x-kubernetes-validations":
            continue
        if key in _SUBSCHEMA_MAPS:
            out[key] = {name: _convert(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA_LISTS:
            out[key] = [_convert(sub) for sub in value]
        elif key in _SUBSCHEMA_ONE:
            out[key] = _convert(value)
        else:
            out[key] = copy.deepcopy(value)
    if out.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    for rule in node.get("x-kubernetes-validations", ()):
        expression = " ".join(rule["rule"].split())
        if expression in SERVER_ONLY_RULES:
            continue
        if expression not in CEL_EQUIVALENTS:
            raise UnsupportedRule(f"no local equivalent for CEL rule {expression!r}")
        equivalent = copy.deepcopy(CEL_EQUIVALENTS[expression])
        message = " ".join(rule.get("message", "").split()) or f"failed rule: {expression}"
        messages = {keyword: message for keyword in equivalent}
        if all(out.get(keyword) == value for keyword, value in equivalent.items()):
            # The schema already states the rule (e.g. resource's pattern): reuse its keyword,
            # but speak with the rule's message.
            out.setdefault(_MESSAGES, {}).update(messages)
        else:
            equivalent[_MESSAGES] = messages
            out.setdefault("allOf", []).append(equivalent)
    return out


@functools.lru_cache(maxsize=1)
def _run_schema_cached():
    return _convert(_served_schema(_crd_cached()))


def run_schema():
    """The whole RepackRun schema as converted for jsonschema (a fresh copy)."""
    return copy.deepcopy(_run_schema_cached())


def spec_schema():
    """The converted jsonschema of `spec` (a fresh copy), e.g. to document or build flags."""
    return copy.deepcopy(_run_schema_cached()["properties"]["spec"])


def _run_check(validator, name, instance, schema):
    import jsonschema

    for path in CHECKS[name](instance):
        yield jsonschema.ValidationError(f"failed rule {name}", path=path)


@functools.lru_cache(maxsize=1)
def _validator_class():
    # imported on the first object that does not conform (see `conforms`)
    import jsonschema

    # Draft 7 counts 10.0 as an integer, and so does the API server (it stores it as 10).
    return jsonschema.validators.extend(jsonschema.Draft7Validator, {_CHECK: _run_check})


def _validator_for(schema):
    return _validator_class()(schema)


# ---------- valid objects without jsonschema ----------
# Speed: importing jsonschema (urllib.request, http.client, ssl, attrs, pyrsistent with it) costs
# about 40 ms of every `plan` and `apply` process, a twentieth of planning a 1,000-node cluster.
# Valid objects, the usual case, are recognised here without it; an object that does not conform
# goes to the jsonschema validator, which alone finds and describes the errors. `conforms` answers
# exactly as Draft7Validator(schema).is_valid(value) does for the keywords of _DRAFT7 (held equal by
# tests/unit/validation/test_conforms.py); a schema with any other keyword is always sent to
# jsonschema, so a schema change cannot make the fast path accept what jsonschema refuses.

def _is_type(value, name):
    if name == "object":
        return isinstance(value, dict)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    if isinstance(value, bool):
        return name == "boolean"
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, numbers.Number)
    if name == "null":
        return value is None
    return False


def _unbool(value, true=object(), false=object()):
    return true if value is True else false if value is False else value


def _enum_ok(value, options):
    if value == 0 or value == 1:
        # true is not 1 and false is not 0 here (as jsonschema's enum keeps them apart)
        return not all(_unbool(value) != _unbool(o) for o in options)
    return value in options


def _properties_ok(value, props, node):
    return not isinstance(value, dict) or all(k not in value or _conforms(value[k], sub) for k, sub in props.items())


def _additional_ok(value, extra, node):
    if not isinstance(value, dict):
        return True
    props = node.get("properties", {})
    extras = [k for k in value if k not in props]
    if extra is False:
        return not extras
    if extra is True:
        return True
    return all(_conforms(value[k], extra) for k in extras)


_DRAFT7 = {   # keyword -> check(value, the keyword's value, the schema node); Draft 7 as jsonschema 4.17
    "type": lambda v, t, n: any(_is_type(v, x) for x in t) if isinstance(t, list) else _is_type(v, t),
    "properties": _properties_ok,
    "additionalProperties": _additional_ok,
    "required": lambda v, req, n: not isinstance(v, dict) or all(k in v for k in req),
    "enum": lambda v, opts, n: _enum_ok(v, opts),
    "minimum": lambda v, m, n: not _is_type(v, "number") or not v < m,
    "maximum": lambda v, m, n: not _is_type(v, "number") or not v > m,
    "minItems": lambda v, m, n: not isinstance(v, list) or len(v) >= m,
    "maxItems": lambda v, m, n: not isinstance(v, list) or len(v) <= m,
    "minLength": lambda v, m, n: not isinstance(v, str) or len(v) >= m,
    "maxLength": lambda v, m, n: not isinstance(v, str) or len(v) <= m,
    "maxProperties": lambda v, m, n: not isinstance(v, dict) or len(v) <= m,
    "pattern": lambda v, pat, n: not isinstance(v, str) or re.search(pat, v) is not None,
    "items": lambda v, sub, n: not isinstance(v, list) or all(_conforms(x, sub) for x in v),
    "allOf": lambda v, subs, n: all(_conforms(v, s) for s in subs),
    "anyOf": lambda v, subs, n: any(_conforms(v, s) for s in subs),
    "oneOf": lambda v, subs, n: sum(1 for s in subs if _conforms(v, s)) == 1,
    _CHECK: lambda v, name, n: next(iter(CHECKS[name](v)), None) is None,
}
# keywords jsonschema's Draft 7 validator does not check (annotations, and format without a checker)
_ANNOTATIONS = frozenset({"default", "description", "format", "title", "example", "nullable", _MESSAGES})


def _conforms(value, node):
    for keyword, expected in node.items():
        check = _DRAFT7.get(keyword)
        if check is not None and not check(value, expected, node):
            return False
    return True


def _supported(node):
    """Does every keyword of `node` and its subschemas have a check in _DRAFT7 (or check nothing)?"""
    if not isinstance(node, dict):
        return False
    for keyword, value in node.items():
        if keyword in _DRAFT7:
            if keyword in _SUBSCHEMA_MAPS and not all(_supported(sub) for sub in value.values()):
                return False
            if keyword in _SUBSCHEMA_LISTS and not all(_supported(sub) for sub in value):
                return False
            if keyword in ("items", "additionalProperties") and not (
                    isinstance(value, bool) and keyword == "additionalProperties" or _supported(value)):
                return False
        elif keyword not in _ANNOTATIONS and not keyword.startswith("x-kubernetes-"):
            return False
    return True


_SUPPORTED = {}   # id(schema) -> (schema, supported)


def conforms(value, schema) -> bool:
    """Is `value` valid under the converted `schema` (as jsonschema would say)? False also when the
    schema has a keyword this fast path does not know."""
    got = _SUPPORTED.get(id(schema))
    if got is None or got[0] is not schema:
        got = _SUPPORTED[id(schema)] = (schema, _supported(schema))
    return got[1] and _conforms(value, schema)


def _schema_errors_of(schema, obj, prefix=()):
    """_schema_errors of `obj` under `schema`, without jsonschema when it conforms."""
    if conforms(obj, schema):
        return set()
    return _schema_errors(_validator_for(schema), obj, prefix)


# ---------- error rendering ----------

def _json_type(value):
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    if value is None:
        return "null"
    return type(value).__name__


def _show(value):
    """A value as the user wrote it: strings quoted, scalars as in YAML, containers by type."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list, tuple)):
        return f"an {_json_type(value)}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# Only for rendering paths: the CRD leaves metadata free-form, but its maps are maps.
_METADATA_SHAPE = {"properties": {
    "name": {}, "generateName": {}, "namespace": {},
    "labels": {"additionalProperties": {}}, "annotations": {"additionalProperties": {}},
}}


def _format_path(path, schema, last_is_field=False):
    """Render an instance path kubectl-style: fields with dots, map keys and indexes in brackets."""
    if not path:
        return ROOT
    parts = []
    for position, element in enumerate(path):
        is_last = position == len(path) - 1
        schema = schema if isinstance(schema, dict) else {}
        if position == 1 and path[0] == "metadata":
            schema = _METADATA_SHAPE
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        if isinstance(element, int) and not isinstance(element, bool):
            parts.append(f"[{element}]")
            schema = schema.get("items", {})
        elif element in properties or (is_last and last_is_field) or not isinstance(extra, dict):
            parts.append(f".{element}" if parts else str(element))
            schema = properties.get(element, {})
        else:
            parts.append(f"[{element}]")
            schema = extra
    return "".join(parts)


def _is_quantity_schema(schema):
    return bool(schema.get("x-kubernetes-int-or-string"))


def _messages_for(error):
    """Yield (relative path, message, names_a_field) for one jsonschema error."""
    schema = error.schema if isinstance(error.schema, dict) else {}
    value, keyword, expected = error.instance, error.validator, error.validator_value
    override = schema.get(_MESSAGES, {}).get(keyword)
    if override:
        yield (), override, False
    elif keyword == "additionalProperties" and expected is False and isinstance(value, dict):
        known = set(schema.get("properties", {}))
        patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
        for name in value:
            if name not in known and not any(p.search(str(name)) for p in patterns):
                yield (name,), UNKNOWN_FIELD, True
    elif keyword == "required" and isinstance(value, dict):
        for name in expected:
            if name not in value:
                yield (name,), REQUIRED, True
    elif _is_quantity_schema(schema) and keyword in ("anyOf", "pattern"):
        yield (), (f"{_show(value)} is not a valid quantity: expected an integer or a string "
                   "such as '8', '500m' or '2Gi'"), False
    elif keyword == "type":
        wanted = expected if isinstance(expected, str) else " or ".join(expected)
        if isinstance(value, (dict, list, tuple)):
            yield (), f"expected {wanted}, got {_json_type(value)}", False
        else:
            yield (), f"{_show(value)} is not of type {wanted!r}", False
    elif keyword == "enum":
        yield (), f"{_show(value)} is not one of {list(expected)!r}", False
    elif keyword == "minimum":
        yield (), f"{_show(value)} is less than the minimum of {expected}", False
    elif keyword == "maximum":
        yield (), f"{_show(value)} is greater than the maximum of {expected}", False
    elif keyword == "maxProperties":
        yield (), f"has {len(value)} entries, more than the maximum of {expected}", False
    elif keyword == "maxItems":
        yield (), f"has {len(value)} items, more than the maximum of {expected}", False
    elif keyword == "minItems":
        yield (), f"has {len(value)} items, fewer than the minimum of {expected}", False
    elif keyword == "maxLength":
        yield (), f"is {len(value)} characters long, more than the maximum of {expected}", False
    elif keyword == "minLength":
        yield (), f"is {len(value)} characters long, fewer than the minimum of {expected}", False
    elif keyword == "pattern":
        yield (), f"{_show(value)} does not match {expected!r}", False
    else:
        yield (), error.message, False


def _schema_errors(validator, obj, prefix=()):
    found = set()
    for error in validator.iter_errors(obj):
        base = tuple(prefix) + tuple(error.absolute_path)
        for extra, message, names_field in _messages_for(error):
            found.add((base + tuple(extra), message, names_field, error.validator == "type"))
    # A value of the wrong type fails its enum, pattern and bounds too: report the type alone.
    mistyped = {path for path, _, _, is_type in found if is_type}
    return {(path, message, names_field) for path, message, names_field, is_type in found
            if is_type or path not in mistyped}


def _metadata_errors(obj, kind=KIND, api_version=API_VERSION):
    """Checks the CRD cannot express: identity of the object (a `kind` of `api_version`, a RepackRun
    unless said otherwise) and its cluster scope."""
    found = set()
    got_version, got_kind = obj.get("apiVersion"), obj.get("kind")
    if "apiVersion" not in obj:
        found.add((("apiVersion",), REQUIRED, True))
    elif isinstance(got_version, str) and got_version != api_version:
        found.add((("apiVersion",), f"{got_version!r} is not {api_version!r}", True))
    if "kind" not in obj:
        found.add((("kind",), REQUIRED, True))
    elif isinstance(got_kind, str) and got_kind != kind:
        found.add((("kind",), f"{got_kind!r} is not {kind!r}", True))

    metadata = obj.get("metadata")
    if "metadata" not in obj:
        found.add((("metadata",), REQUIRED, True))
        return found
    if not isinstance(metadata, dict):
        return found  # the schema's type error names it
    name = metadata.get("name")
    if "name" not in metadata:
        found.add((("metadata", "name"), REQUIRED, True))
    elif not isinstance(name, str):
        found.add((("metadata", "name"), f"{_show(name)} is not of type 'string'", True))
    elif name_problem(name):
        found.add((("metadata", "name"), name_problem(name), True))
    if metadata.get("namespace"):
        found.add((("metadata", "namespace"),
                   f"{kind} is cluster-scoped: remove metadata.namespace", True))
    for field in ("labels", "annotations"):
        if field not in metadata:
            continue
        values = metadata[field]
        if not isinstance(values, dict):
            found.add((("metadata", field), f"expected object, got {_json_type(values)}", True))
            continue
        for key, value in values.items():
            if not isinstance(value, str):
                found.add((("metadata", field, key), f"{_show(value)} is not of type 'string'",
                           False))
    return found


def _sort_key(item):
    path, message, _ = item
    return (tuple((1, "", e) if isinstance(e, int) and not isinstance(e, bool) else (0, str(e), 0)
                  for e in path), message)


def _render(found, schema):
    return [f"{_format_path(path, schema, names_field)}: {message}"
            for path, message, names_field in sorted(found, key=_sort_key)]


def _as_stored(value, schema):
    """A copy of `value` as the API server would store it: fields set to null are dropped
    (`scope:` with every line below it commented out means no scope, not an error), and whole
    numbers written as floats (10.0) in integer fields become integers."""
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            if key in properties:
                if item is None and not properties[key].get("nullable"):
                    continue
                out[key] = _as_stored(item, properties[key])
            else:
                out[key] = _as_stored(item, extra if isinstance(extra, dict) else {})
        return out
    if isinstance(value, list):
        return [_as_stored(item, schema.get("items", {})) for item in value]
    if (isinstance(value, float) and value.is_integer()
            and (schema.get("type") == "integer" or schema.get("x-kubernetes-int-or-string"))):
        return int(value)
    return value


def validate_run(obj):
    """Validate one RepackRun object; return it as the API server would store it (a copy without
    null fields, 10.0 as 10) or raise ValidationError with one `<path>: <message>` per error."""
    schema = _run_schema_cached()
    if not isinstance(obj, dict):
        raise ValidationError([f"{ROOT}: expected a {KIND} object, got {_json_type(obj)}"])
    obj = _as_stored(obj, schema)
    found = _schema_errors_of(schema, obj) | _metadata_errors(obj)
    if found:
        raise ValidationError(_render(found, schema))
    return obj


def validate_spec(spec):
    """Validate a bare RepackRun spec (e.g. built from flags); paths start with `spec.`.
    Returns the spec as stored, like validate_run."""
    schema = _run_schema_cached()
    spec_schema_ = schema["properties"]["spec"]
    if isinstance(spec, dict):
        spec = _as_stored(spec, spec_schema_)
    found = _schema_errors_of(spec_schema_, spec, prefix=("spec",))
    if found:
        raise ValidationError(_render(found, schema))
    return spec


# ---------- text input ----------

def _parse_documents(text, source_name):
    try:
        return documents.parse(text, source_name, flatten_array=False, fast=False)
    except DocumentError as exc:
        raise ValidationError([str(exc)]) from exc


def validate_run_text(text, source_name="<stdin>"):
    """Parse YAML or JSON holding exactly one RepackRun, validate it, and return the object.

    Parse errors are reported as ``<source_name>:<line>:<column>: ...`` (or ``<source_name>: ...``
    for an empty input, several objects or a list); schema errors as in validate_run.
    """
    documents = _parse_documents(text, source_name)
    if not documents:
        raise ValidationError([f"{source_name}: no object found, expected one {KIND}"])
    if len(documents) > 1:
        raise ValidationError(
            [f"{source_name}: found {len(documents)} objects, expected exactly one {KIND}"])
    document = documents[0]
    if isinstance(document, list):
        raise ValidationError([f"{source_name}: found a list, expected one {KIND} object"])
    if not isinstance(document, dict):
        raise ValidationError(
            [f"{source_name}: found a {_json_type(document)}, expected one {KIND} object"])
    return validate_run(document)


__all__ = ["API_VERSION", "KIND", "CRD_NAME", "load_crd", "run_schema", "spec_schema",
           "validate_run", "validate_spec", "validate_run_text", "UnsupportedRule",
           "ValidationError"]
