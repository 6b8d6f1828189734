"""kubectl's own output dialects (`-o jsonpath=`, `-o custom-columns=`, `-o name`) as pure functions.

Why this exists: platform teams script kubectl with `-o jsonpath=...`, and a plugin that claims
kubectl's conventions must render the same template to the same bytes. Python's JSONPath
libraries implement a different dialect (no `{range}`/`{end}`, no text between actions, other
filter and printing rules), so this package re-implements the one in k8s.io/client-go/util/jsonpath
with the settings kubectl's printers use (k8s.io/cli-runtime/pkg/printers/jsonpath.go,
genericclioptions/jsonpath_flags.go, k8s.io/kubectl/pkg/cmd/get/customcolumn.go, printers/name.go).
It is stdlib only, with no I/O (an import-linter contract keeps it pure), so it runs in the krew
zipapp under `python3 -I -S`; the commands decide where the text goes.
tests/e2e/test_output_differential.py compares it byte for byte with the real kubectl.

The data model is the one kubectl's unstructured objects have: dict = map[string]interface{},
list = []interface{}, int = int64, float = float64, str, bool, None = JSON null.

kubectl behaviours that this package reproduces on purpose (they surprise people):
  * `{.a['b.c']}` is `{.a.b.c}`: a bracketed key is re-parsed as a dotted path. A key with a dot
    must be written `{.a.b\\.c}`.
  * Missing keys print nothing (kubectl's `--allow-missing-template-keys` defaults to true), but
    an index out of range, a slice end past the end (`[0:10]` on 3 items: no clamping) or an index
    into an empty list is an error.
  * Several results of one action are joined by a space; maps and lists print as compact JSON
    (sorted keys, no spaces, `<`, `>`, `&` escaped as \\u003c...); floats print like Go's %v
    (1e+06, 1.5e-05), ints as integers.
  * `..` yields only non-empty maps, lists and strings (never numbers or bools), and `.*` / `..`
    over a string yield its UTF-8 bytes as numbers.
  * Filters compare like Go templates: an int field against a float literal, or a string against a
    number, is an error ("incompatible types for comparison"), not false.
  * Go visits map entries in random order for `.*` and `..`; this package uses sorted key order,
    so those two constructs over maps with several keys can differ from kubectl in order only.
  * A JSON null prints `null`, but a null that a `{range}` iterates over is Go's zero value:
    `{range .a[*]}{@}{end}` prints `<no value>` for it.
  * `{range}` without `{end}` runs the rest of the template per item and then once more on the
    object; an empty slice (`[2:2]`, or `[*]` of an empty list) among several inputs ends the
    selection early (client-go returns at once).
  * kubectl's jsonpath sees metadata.managedFields (only `-o json|yaml` hide them), so give this
    package the object as the API server returned it.
  * custom-columns headers are printed as given (not upper-cased); values are Go's fmt.Sprint
    (`map[k:v]`, `[a b]`), several values are joined by commas, no value is `<none>`.

Errors are JSONPathError (a ValueError) whose str() is what kubectl prints after "error: " (for
execution errors without kubectl's dump of the object); `.reason` is client-go's own message.

Where each part lives: `gofmt` (Go's value model and its json/fmt printing), `parse` (client-go's
template parser), `jsonpath` (its executor and `-o jsonpath=`), `columns` (`-o custom-columns=`,
kubectl's tabwriter, `check_template`), `names` (`-o name`), `errors` (JSONPathError).
"""
from __future__ import annotations

from .columns import check_template, custom_columns, tabwrite
from .errors import JSONPathError
from .gofmt import go_json, go_sprint
from .jsonpath import jsonpath
from .names import name, names

__all__ = ["JSONPathError", "jsonpath", "custom_columns", "check_template", "tabwrite", "name", "names", "go_json",
           "go_sprint"]
