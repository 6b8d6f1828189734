"""kubectl_repack.printing: kubectl's jsonpath / custom-columns / name dialects, case by case.

Three kinds of tables: client-go's own test tables (util/jsonpath/jsonpath_test.go and
parser_test.go, v0.34.1), ported with their expected outputs; a corpus whose expected outputs were
printed by the real kubectl v1.34.1 (`kubectl label --local -f DATA zz- -o jsonpath=T`, which
prints the object through the same printer as `kubectl get`); and the formatting rules (Go's %v
and json.Marshal, kubectl's tabwriter, `-o name`). tests/e2e/test_output_differential.py checks
the same module against kubectl get on RepackRuns in the e2e control plane.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kubectl_repack.printing import (JSONPathError, custom_columns, go_json, go_sprint, jsonpath, name,
                                     names, tabwrite)

ERROR = "<kubectl exits non-zero>"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def render(template, data, allow_missing_keys=True):
    try:
        return jsonpath(template, data, allow_missing_keys=allow_missing_keys)
    except JSONPathError:
        return ERROR


# ---------------------------------------------------------------- client-go's tables

TYPES = {
    "bools": [True, False, True, False],
    "integers": [1, 2, 3, 4],
    "floats": [1.0, 2.2, 3.3, 4.0],
    "strings": ["one", "two", "three", "four"],
    "interfaces": [True, "one", 1, 1.1],
    "maps": [{"name": "one", "value": 1}, {"name": "two", "value": 2.02},
             {"name": "three", "value": 3.03}, {"name": "four", "value": 4.04}],
}

TYPES_TESTS = [
    ("{ .bools }", "[true,false,true,false]"),
    ("{ .bools[0] }", "true"),
    ("{ .bools[-1] }", "false"),
    ("{ .bools[0:2] }", "true false"),
    ("{ .bools[:2] }", "true false"),
    ("{ .bools[:4:2] }", "true true"),
    ("{ .integers }", "[1,2,3,4]"),
    ("{ .integers[0] }", "1"),
    ("{ .integers[-2] }", "3"),
    ("{ .integers[0:2] }", "1 2"),
    ("{ .integers[:2] }", "1 2"),
    ("{ .integers[:4:2] }", "1 3"),
    ("{ .floats }", "[1,2.2,3.3,4]"),
    ("{ .floats[0] }", "1"),
    ("{ .floats[-2] }", "3.3"),
    ("{ .floats[0:2] }", "1 2.2"),
    ("{ .floats[:2] }", "1 2.2"),
    ("{ .floats[:4:2] }", "1 3.3"),
    ("{ .strings }", '["one","two","three","four"]'),
    ("{ .strings[0] }", "one"),
    ("{ .strings[-2] }", "three"),
    ("{ .strings[0:2] }", "one two"),
    ("{ .strings[:2] }", "one two"),
    ("{ .strings[:4:2] }", "one three"),
    ("{ .interfaces }", '[true,"one",1,1.1]'),
    ("{ .interfaces[0] }", "true"),
    ("{ .interfaces[-2] }", "1"),
    ("{ .interfaces[0:2] }", "true one"),
    ("{ .interfaces[:2] }", "true one"),
    ("{ .interfaces[:4:2] }", "true 1"),
    ("{ .maps }", '[{"name":"one","value":1},{"name":"two","value":2.02},{"name":"three","value":3.03},'
                  '{"name":"four","value":4.04}]'),
    ("{ .maps[0] }", '{"name":"one","value":1}'),
    ("{ .maps[-2] }", '{"name":"three","value":3.03}'),
    ("{ .maps[0:2] }", '{"name":"one","value":1} {"name":"two","value":2.02}'),
    ("{ .maps[:2] }", '{"name":"one","value":1} {"name":"two","value":2.02}'),
    ("{ .maps[::2] }", '{"name":"one","value":1} {"name":"three","value":3.03}'),
    ("{ .maps[1::2] }", '{"name":"two","value":2.02} {"name":"four","value":4.04}'),
]


@pytest.mark.parametrize("template,expected", TYPES_TESTS)
def test_client_go_types_input(template, expected):
    assert jsonpath(template, TYPES, allow_missing_keys=False) == expected


STORE = {  # client-go's storeData, as the map kubectl would see (maps print with sorted keys)
    "Name": "jsonpath",
    "Book": [{"Category": "reference", "Author": "Nigel Rees", "Title": "Sayings of the Centurey", "Price": 8.95},
             {"Category": "fiction", "Author": "Evelyn Waugh", "Title": "Sword of Honour", "Price": 12.99},
             {"Category": "fiction", "Author": "Herman Melville", "Title": "Moby Dick", "Price": 8.99}],
    "Bicycle": [{"Color": "red", "Price": 19.95, "IsNew": True}, {"Color": "green", "Price": 20.01, "IsNew": False}],
    "Labels": {"engieer": 10, "web/html": 15, "k8s-app": 20},
    "Employees": {"jason": "manager", "dan": "clerk"},
}

STORE_TESTS = [
    ("hello jsonpath", None, "hello jsonpath"),
    ("{..}", [1, 2, 3], "[1,2,3]"),
    ("{[?(@<5)]}", [2, 6, 3, 7], "2 3"),
    ('{"{"}', None, "{"),
    ("{[1,3,4]}", [0, 1, 2, 3, 4], "1 3 4"),
    ("{[0:2]}", ["Monday", "Tudesday"], "Monday Tudesday"),
    ("hello {.Name}", STORE, "hello jsonpath"),
    ("{$.Labels.web/html}", STORE, "15"),
    ("{$.Employees.jason}", STORE, "manager"),
    ("{$.Employees.dan}", STORE, "clerk"),
    ("{.Labels.k8s-app}", STORE, "20"),
    ("{.Bicycle[*].Color}", STORE, "red green"),
    ("{.Book[*].Author}", STORE, "Nigel Rees Evelyn Waugh Herman Melville"),
    ('{range .Bicycle[*]}{ "{" }{ @.Color }{ "} " }{end}', STORE, "{red} {green} "),
    ("{.Book[*].Price}", STORE, "8.95 12.99 8.99"),
    ("{...Book[*].Price}", STORE, "8.95 12.99 8.99"),
    ("{.Bicycle}", STORE, '[{"Color":"red","IsNew":true,"Price":19.95},{"Color":"green","IsNew":false,"Price":20.01}]'),
    ('{range .Bicycle[*]}{ @ }{ " " }{end}', STORE,
     '{"Color":"red","IsNew":true,"Price":19.95} {"Color":"green","IsNew":false,"Price":20.01} '),
    ("{.Book[-1:]}", STORE, '{"Author":"Herman Melville","Category":"fiction","Price":8.99,"Title":"Moby Dick"}'),
    ("{..Book[2]}", STORE, '{"Author":"Herman Melville","Category":"fiction","Price":8.99,"Title":"Moby Dick"}'),
    ("{.Bicycle[?(@.IsNew==true)]}", STORE, '{"Color":"red","IsNew":true,"Price":19.95}'),
]


@pytest.mark.parametrize("template,data,expected", STORE_TESTS)
def test_client_go_store_input(template, data, expected):
    assert jsonpath(template, data, allow_missing_keys=False) == expected


def test_client_go_recursive_descent_over_maps_finds_every_price():
    out = jsonpath("{..Price}", STORE, allow_missing_keys=False)
    assert sorted(out.split()) == ["12.99", "19.95", "20.01", "8.95", "8.99"]
    with pytest.raises(JSONPathError):
        jsonpath("{............................................................Price}", STORE)


def test_client_go_missing_keys_print_nothing_when_allowed():
    assert jsonpath("{.hello}", STORE) == ""
    assert jsonpath("before-{.hello}after", STORE) == "before-after"


@pytest.mark.parametrize("template,reason", [
    ("{hello}", "unrecognized identifier hello"),
    ("{.hello}", "hello is not found"),
    ("{.Labels[0]}", "map[string]interface {} is not array or slice"),
    ("{.Book[?(@.Price<>10)]}", "unrecognized filter operator <>"),
    ("{range .Labels.*}{@}{end}{end}", "not in range, nothing to end"),
])
def test_client_go_execution_errors(template, reason):
    with pytest.raises(JSONPathError) as exc:
        jsonpath(template, STORE, allow_missing_keys=False)
    assert exc.value.reason == reason
    assert str(exc.value) == f'error executing jsonpath "{template}": Error executing template: {reason}.'


POINTS = json.loads("""[
    {"id": "i1", "x":4, "y":-5},
    {"id": "i2", "x":-2, "y":-5, "z":1},
    {"id": "i3", "x":  8, "y":  3 },
    {"id": "i4", "x": -6, "y": -1 },
    {"id": "i5", "x":  0, "y":  2, "z": 1 },
    {"id": "i6", "x":  1, "y":  4 },
    {"id": "i7", "x":  null, "y":  4 }
]""")


@pytest.mark.parametrize("template,expected", [
    ("{[?(@.z)].id}", "i2 i5"),
    ("{[0]['id']}", "i1"),
    ("{[-1]['x']}", "null"),
])
def test_client_go_json_input(template, expected):
    assert jsonpath(template, POINTS, allow_missing_keys=False) == expected


NODES = json.loads("""{
  "kind": "List",
  "items":[
    {"kind":"None","metadata":{"name":"127.0.0.1","labels":{"kubernetes.io/hostname":"127.0.0.1"}},
     "status":{"capacity":{"cpu":"4"},"ready": true,"addresses":[{"type": "LegacyHostIP", "address":"127.0.0.1"}]}},
    {"kind":"None","metadata":{"name":"127.0.0.2","labels":{"kubernetes.io/hostname":"127.0.0.2"}},
     "status":{"capacity":{"cpu":"8"},"ready": false,
               "addresses":[{"type": "LegacyHostIP", "address":"127.0.0.2"},{"type": "another", "address":"127.0.0.3"}]}}
  ],
  "users":[{"name": "myself","user": {}},{"name": "e2e","user": {"username": "admin", "password": "secret"}}]
}""")


@pytest.mark.parametrize("template,expected", [
    ("{range .items[*]}{.metadata.name}, {end}{.kind}", "127.0.0.1, 127.0.0.2, List"),
    ('{range .items[*]}{.metadata.name}{"\\t"}{end}', "127.0.0.1\t127.0.0.2\t"),
    ("{.items[*].status.addresses[*].address}", "127.0.0.1 127.0.0.2 127.0.0.3"),
    ("{range .items[*]}{range .status.addresses[*]}{.address}, {end}{end}", "127.0.0.1, 127.0.0.2, 127.0.0.3, "),
    ("{.items[*].metadata.name}", "127.0.0.1 127.0.0.2"),
    ("{.items[*]['metadata.name', 'status.capacity']}", '127.0.0.1 127.0.0.2 {"cpu":"4"} {"cpu":"8"}'),
    ("{range .items[*]}[{.metadata.name}, {.status.capacity}] {end}", '[127.0.0.1, {"cpu":"4"}] [127.0.0.2, {"cpu":"8"}] '),
    ('{.users[?(@.name=="e2e")].user.password}', "secret"),
    ("{.items[0].metadata.labels.kubernetes\\.io/hostname}", "127.0.0.1"),
    ('{.items[?(@.metadata.labels.kubernetes\\.io/hostname=="127.0.0.1")].kind}', "None"),
    ("{.items[?(@..ready==true)].metadata.name}", "127.0.0.1"),
])
def test_client_go_kubernetes(template, expected):
    assert jsonpath(template, NODES, allow_missing_keys=False) == expected


def test_client_go_recursive_name_in_any_order():
    assert sorted(jsonpath("{..name}", NODES).split()) == ["127.0.0.1", "127.0.0.2", "e2e", "myself"]


@pytest.mark.parametrize("template", [
    "{range .items[*]}{.metadata.name}{end}",
    '{range .items[*]}{.metadata.name}{":"}{range @.spec.containers[*]}{.name}{","}{end}{"+"}{end}',
])
def test_client_go_empty_range(template):
    assert jsonpath(template, {"items": []}) == ""


PODS = json.loads("""{"items": [
  {"metadata": {"name": "pod1"}, "spec": {"containers": [
     {"name": "foo", "another": [{"name": "value1"}, {"name": "value2"}]},
     {"name": "bar", "another": [{"name": "value1"}, {"name": "value2"}]}]}},
  {"metadata": {"name": "pod2"}, "spec": {"containers": [
     {"name": "baz", "another": [{"name": "value1"}, {"name": "value2"}]}]}}]}""")


@pytest.mark.parametrize("template,expected", [
    ('{range .items[*]}{.metadata.name}{":"}{range @.spec.containers[*]}{.name}{","}{end}{"+"}{end}',
     "pod1:foo,bar,+pod2:baz,+"),
    ('{range .items[*]}{.metadata.name}{"~"}{range @.spec.containers[*]}{.name}{":"}'
     '{range @.another[*]}{.name}{","}{end}{"+"}{end}{"#"}{end}',
     "pod1~foo:value1,value2,+bar:value1,value2,+#pod2~baz:value1,value2,+#"),
    ('{range .items[*]}{.metadata.name}{"\\t"}{range @.spec.containers[*]}{.name}{" "}{end}{"\\t"}'
     '{range @.spec.containers[*]}{.name}{" "}{end}{"\\n"}{end}',
     "pod1\tfoo bar \tfoo bar \npod2\tbaz \tbaz \n"),
])
def test_client_go_nested_ranges(template, expected):
    assert jsonpath(template, PODS, allow_missing_keys=False) == expected


ANNOTATED = {"kind": "List", "items": [
    {"kind": "Pod", "metadata": {"name": "pod1", "annotations": {"color": "blue"}}},
    {"kind": "Pod", "metadata": {"name": "pod2"}},
    {"kind": "Pod", "metadata": {"name": "pod3", "annotations": {"color": "green"}}},
    {"kind": "Pod", "metadata": {"name": "pod4", "annotations": {"color": "blue"}}}]}


def test_client_go_filter_tolerates_missing_keys_only_when_allowed():
    t = '{.items[?(@.metadata.annotations.color=="blue")].metadata.name}'
    assert jsonpath(t, ANNOTATED) == "pod1 pod4"
    with pytest.raises(JSONPathError):
        jsonpath(t, ANNOTATED, allow_missing_keys=False)


CONTAINERS = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
    {"image": "radial/busyboxplus:curl", "name": f"fake{i}"} for i in range(4)]}}


@pytest.mark.parametrize("template,expected", [
    ("{.spec.containers[0].name}", "fake0"),
    ("{.spec.containers[0:0].name}", ""),
    ("{.spec.containers[0:-1].name}", "fake0 fake1 fake2"),
    ("{.spec.containers[-1:0].name}", ERROR),
    ("{.spec.containers[-1].name}", "fake3"),
    ("{.spec.containers[-1:].name}", "fake3"),
    ("{.spec.containers[-2].name}", "fake2"),
    ("{.spec.containers[-2:].name}", "fake2 fake3"),
    ("{.spec.containers[-3].name}", "fake1"),
    ("{.spec.containers[-4].name}", "fake0"),
    ("{.spec.containers[-4:].name}", "fake0 fake1 fake2 fake3"),
    ("{.spec.containers[-5].name}", ERROR),
    ("{.spec.containers[5:5].name}", ""),
    ("{.spec.containers[-5:-5].name}", ""),
    ("{.spec.containers[3:1].name}", ERROR),
    ("{.spec.containers[-1:-2].name}", ERROR),
])
def test_client_go_negative_index(template, expected):
    assert render(template, CONTAINERS, allow_missing_keys=False) == expected


def test_client_go_running_pods_filter_without_at():
    data = {"kind": "List", "items": [
        {"kind": "Pod", "metadata": {"name": f"pod{i}"}, "status": {"phase": "Running"}} for i in (1, 2, 3)]
        + [{"resourceVersion": ""}]}
    t = '{range .items[?(.status.phase=="Running")]}{.metadata.name}{" is Running\\n"}{end}'
    assert jsonpath(t, data) == "pod1 is Running\npod2 is Running\npod3 is Running\n"


SIX = {"spec": {"containers": [{"name": f"fake{i}"} for i in range(6)]}}


@pytest.mark.parametrize("template,expected", [
    ("{.spec.containers[0:].name}", "fake0 fake1 fake2 fake3 fake4 fake5"),
    ("{.spec.containers[0:6:].name}", "fake0 fake1 fake2 fake3 fake4 fake5"),
    ("{.spec.containers[0:6:1].name}", "fake0 fake1 fake2 fake3 fake4 fake5"),
    ("{.spec.containers[0:6:0].name}", ERROR),
    ("{.spec.containers[0:6:-1].name}", ERROR),
    ("{.spec.containers[1:4:2].name}", "fake1 fake3"),
    ("{.spec.containers[1:4:3].name}", "fake1"),
    ("{.spec.containers[1:4:4].name}", "fake1"),
    ("{.spec.containers[0:6:2].name}", "fake0 fake2 fake4"),
    ("{.spec.containers[0:6:3].name}", "fake0 fake3"),
    ("{.spec.containers[0:6:5].name}", "fake0 fake5"),
    ("{.spec.containers[0:6:6].name}", "fake0"),
])
def test_client_go_step(template, expected):
    assert render(template, SIX, allow_missing_keys=False) == expected


@pytest.mark.parametrize("template,reason", [
    ("{.hello", "unclosed action"),
    ("{*}", "unrecognized character in action: U+002A '*'"),
    ("{+12.3.0}", "cannot parse number +12.3.0"),
    ("{[1}", "unterminated array"),
    ("{[?(.price]}", "unterminated filter"),
    ("{........}", "invalid multiple recursive descent"),
    ("{\\\\\\}", "unrecognized character in action: U+005C '\\'"),
    ("{.a\t}", "unrecognized character in action: U+0009"),
    ("{.a[x]}", "invalid array index x"),
    ("{.a[1:-]}", "array index - is not a number"),
    ('{"a\\q"}', 'unquote string "a\\q" error invalid syntax'),
    ("{'a\\\"'}", "unquote string 'a\\\"' error invalid syntax"),
    ('{"a}', "unterminated quoted string"),
    ("{[?(@.a==1)x}", "unclosed array expect ]"),
])
def test_client_go_parse_errors(template, reason):
    with pytest.raises(JSONPathError) as exc:
        jsonpath(template, {})
    assert exc.value.reason == reason
    assert str(exc.value) == f"error parsing jsonpath {template}, {reason}"


@pytest.mark.parametrize("template,data,expected", [
    # parser_test.go's shapes, checked through what they print
    ("hello {['jsonpath']}", {"jsonpath": "x"}, "hello x"),
    ("{['book.price']}", {"book": {"price": 3}}, "3"),
    ("{['bicycle.price', 'book.price']}", {"bicycle": {"price": 1}, "book": {"price": 2}}, "1 2"),
    ("{['bicycle.price', 3, 'book.price']}", {"bicycle": {"price": 1}, "book": {"price": 2}}, ERROR),  # [3] of a map
    ("{range .items}{.name},{end}", {"items": [{"name": "a"}]}, ","),
    ('{[?(@.status.nodeInfo.osImage == "()")]}', [{"status": {"nodeInfo": {"osImage": "()"}}}],
     '{"status":{"nodeInfo":{"osImage":"()"}}}'),
    ('{[?(@.status.nodeInfo.osImage == "(\\"\\")")].status.nodeInfo.osImage}',
     [{"status": {"nodeInfo": {"osImage": '("")'}}}], '("")'),
    ('{[?(@.test == "())(")].test}', [{"test": "())("}], "())("),
    ("{[?(@.s == 'Linux')].s}", [{"s": "Linux"}, {"s": "Windows"}], "Linux"),
    ('{[?(@.s == "{[()]}")].s}', [{"s": "{[()]}"}], "{[()]}"),
    ("{[?(@.s == \"''\")].s}", [{"s": "''"}], "''"),
    ("{[?(@.s == '\"\"')].s}", [{"s": '""'}], '""'),
    ("{[?(@.s == '\\\\\\'')].s}", [{"s": "\\'"}], "\\'"),
    ("{[-5:]}", [1, 2, 3, 4, 5, 6], "2 3 4 5 6"),
    ("{[1:-1]}", [1, 2, 3, 4], "2 3"),
])
def test_client_go_parser_shapes(template, data, expected):
    assert render(template, data) == expected


# ---------------------------------------------------------------- data for the kubectl corpus

DATA = {
 "apiVersion": "x.io/v1",
 "kind": "Foo",
 "metadata": {
  "name": "n1",
  "annotations": {
   "a.b/c": "v1",
   "k8s-app": "web"
  },
  "labels": {}
 },
 "nodes": [
  {
   "kind": "None",
   "metadata": {
    "name": "127.0.0.1",
    "labels": {
     "kubernetes.io/hostname": "127.0.0.1"
    }
   },
   "status": {
    "capacity": {
     "cpu": "4"
    },
    "ready": True,
    "addresses": [
     {
      "type": "LegacyHostIP",
      "address": "127.0.0.1"
     }
    ]
   }
  },
  {
   "kind": "None",
   "metadata": {
    "name": "127.0.0.2",
    "labels": {
     "kubernetes.io/hostname": "127.0.0.2"
    }
   },
   "status": {
    "capacity": {
     "cpu": "8"
    },
    "ready": False,
    "addresses": [
     {
      "type": "LegacyHostIP",
      "address": "127.0.0.2"
     },
     {
      "type": "another",
      "address": "127.0.0.3"
     }
    ]
   }
  }
 ],
 "users": [
  {
   "name": "myself",
   "user": {}
  },
  {
   "name": "e2e",
   "user": {
    "username": "admin",
    "password": "secret"
   }
  }
 ],
 "ints": [
  1,
  2,
  3,
  4
 ],
 "floats": [
  1.0,
  2.2,
  3.3,
  4.0
 ],
 "bools": [
  True,
  False,
  True,
  False
 ],
 "strs": [
  "one",
  "two",
  "three",
  "four"
 ],
 "mixed": [
  True,
  "one",
  1,
  1.1,
  None,
  {
   "x": []
  },
  []
 ],
 "empty": [],
 "emap": {},
 "nul": None,
 "s": "h\u00e9llo <&>\t\"q\"",
 "points": [
  {
   "id": "i1",
   "x": 4,
   "y": -5
  },
  {
   "id": "i2",
   "x": -2,
   "y": -5,
   "z": 1
  },
  {
   "id": "i3",
   "x": 8,
   "y": 3
  },
  {
   "id": "i5",
   "x": 0,
   "y": 2,
   "z": 1
  },
  {
   "id": "i7",
   "x": None,
   "y": 4
  },
  {
   "id": "i8",
   "x": 1.5
  }
 ]
}

# (template, what kubectl v1.34.1 prints for DATA, or ERROR when it exits non-zero)
KUBECTL_CORPUS = [
    ('hello jsonpath', 'hello jsonpath'),
    ('{.ints}', '[1,2,3,4]'),
    ('{ .ints[0] }|{.ints[-1]}|{.ints[0:2]}|{.ints[:2]}|{.ints[:4:2]}|{.ints[1::2]}|{.ints[*]}|{.ints[]}', '1|4|1 2|1 2|1 3|2 4|1 2 3 4|1'),
    ('{.floats}|{.floats[*]}|{.bools}|{.bools[*]}|{.strs}|{.strs[-2]}', '[1,2.2,3.3,4]|1 2.2 3.3 4|[true,false,true,false]|true false true false|["one","two","three","four"]|three'),
    ('{.mixed}|{.mixed[*]}|{.mixed[4]}', '[true,"one",1,1.1,null,{"x":[]},[]]|true one 1 1.1 null {"x":[]} []|null'),
    ('{.nul}|{.emap}|{.empty}|{.empty[*]}|{.s}|{.s.*}', 'null|{}|[]||héllo <&>\t"q"|104 195 169 108 108 111 32 60 38 62 9 34 113 34'),
    ('{.nodes[*].metadata.name}', '127.0.0.1 127.0.0.2'),
    ('{range .nodes[*]}{.metadata.name}, {end}{.kind}', '127.0.0.1, 127.0.0.2, Foo'),
    ('{range .nodes[*]}{.metadata.name}{"\\t"}{end}', '127.0.0.1\t127.0.0.2\t'),
    ('{.nodes[*].status.addresses[*].address}', '127.0.0.1 127.0.0.2 127.0.0.3'),
    ('{range .nodes[*]}{range .status.addresses[*]}{.address}, {end}{end}', '127.0.0.1, 127.0.0.2, 127.0.0.3, '),
    ("{.nodes[*]['metadata.name', 'status.capacity']}", '127.0.0.1 127.0.0.2 {"cpu":"4"} {"cpu":"8"}'),
    ('{range .nodes[*]}[{.metadata.name}, {.status.capacity}] {end}', '[127.0.0.1, {"cpu":"4"}] [127.0.0.2, {"cpu":"8"}] '),
    ('{.users[?(@.name=="e2e")].user.password}', 'secret'),
    ('{.nodes[0].metadata.labels.kubernetes\\.io/hostname}', '127.0.0.1'),
    ('{.nodes[?(@.metadata.labels.kubernetes\\.io/hostname=="127.0.0.1")].kind}', 'None'),
    ('{.nodes[?(@..ready==true)].metadata.name}', '127.0.0.1'),
    ("{.metadata.annotations['a.b/c']}|{.metadata.annotations.a\\.b/c}|{.metadata.annotations.k8s-app}", '|v1|web'),
    ('{.points[?(@.z)].id}', 'i2 i5'),
    ("{.points[0]['id']}", 'i1'),
    ('{.points[?(@.x>0)].id}', ERROR),
    ('{.points[?(@.x>=0)].id}', ERROR),
    ('{.points[?(@.x<0)].id}', ERROR),
    ('{.points[?(@.x!=4)].id}', ERROR),
    ('{.points[?(@.x==1.5)].id}', ERROR),
    ('{.points[?(@.id=="i3")].x}', '8'),
    ('{.points[?(@.id<"i3")].id}', 'i1 i2'),
    ('{.points[?(@.y<=-5)].id}', 'i1 i2'),
    ('{[?(@.z)]}', ERROR),
    ('{.points[?(@.x > 0)].id}', ERROR),
    ("{.points[?(@.id == 'i3')].x}", '8'),
    ('{.ints[?(@ > 2)]}', '3 4'),
    ('{.ints[5]}', ERROR),
    ('{.ints[0:10]}', ERROR),
    ('{.ints[3:1]}', ERROR),
    ('{.ints[-5]}', ERROR),
    ('{.ints[::0]}', ERROR),
    ('{.empty[0]}', ERROR),
    ('{.ints[2:2]}|{.ints[-5:-5]}', '|'),
    ('{.emap[0]}', ERROR),
    ('{.s[0]}', ERROR),
    ('{.points[?(@.x>"a")].id}', ERROR),
    ('{.points[?(@.x<>1)].id}', ERROR),
    ('{.bools[?(@<true)]}', ERROR),
    ('{hello}', ERROR),
    ('{.hello}', ''),
    ('{end}', ERROR),
    ('{range .ints[*]}{@}{end}{end}', ERROR),
    ('{.a', ERROR),
    ('{*}', ERROR),
    ('{+12.3.0}', ERROR),
    ('{[1}', ERROR),
    ('{[?(.price]}', ERROR),
    ('{........}', ERROR),
    ('{$.users[1].name}', 'e2e'),
    ('{"{"}{\'}\'}|{"\\n\\t\\\\"}|{\'a\\\'b\'}|{"\\x41\\u00e9\\101"}', ERROR),
    ('{"\\q"}', ERROR),
    ('{range .points[*]}{.id}{" "}{end}', 'i1 i2 i3 i5 i7 i8 '),
    ('{range .points[*]}{.id}{" "}', 'i1 i2 i3 i5 i7 i8  '),
    ('{range .empty[*]}{.x}{end}done', 'done'),
    ('{range .nodes[*]}{.metadata.name}:{range .status.addresses[*]}{.type}={.address},{end};{end}', '127.0.0.1:LegacyHostIP=127.0.0.1,;127.0.0.2:LegacyHostIP=127.0.0.2,another=127.0.0.3,;'),
    ('{.ints[0,2]}|{.ints[0, -1]}', '1 3|1 4'),
    ('{.users[0,1].name}', 'myself e2e'),
    ("{.users[*]['name']}", 'myself e2e'),
    ('{3}|{1.5}|{true}|{-2}', '3|1.5|true|-2'),
    ('{.ints[?(@==2)]}', '2'),
    ('{.floats[?(@==2.2)]}', '2.2'),
    ('{.floats[?(@==4)]}', ERROR),
    ('{.strs[?(@=="two")]}', 'two'),
    ('{.mixed[?(@=="one")]}', ERROR),
    ('{.points[*].x}', '4 -2 8 0 null 1.5'),
    ('{.points[?(@.x)].id}', 'i1 i2 i3 i5 i7 i8'),
    ('{.nodes[?(@.status.ready)].metadata.name}', '127.0.0.1 127.0.0.2'),
    ('{.nodes[?(@.status.ready==false)].metadata.name}', '127.0.0.2'),
    ('{.s.x}', ''),
    ('{.ints.x}', ''),
    ('{.points[?(@.nope=="x")].id}', ''),
    ('{.nodes[0]..address}', '127.0.0.1'),
    ('{ .ints[ 0 ] }', ERROR),
    ('{.ints[-1:]}|{.ints[-2:]}|{.ints[0:-1]}|{.ints[-1:0]}', ERROR),
    ('{.users[?(@.user.username)].name}', 'e2e'),
    ('{.metadata.name}{"\\n"}', 'n1\n'),
    ('{.nodes[*].metadata.labels}', '{"kubernetes.io/hostname":"127.0.0.1"} {"kubernetes.io/hostname":"127.0.0.2"}'),
    ('{.nodes[?(@.kind=="None")].metadata.name}', '127.0.0.1 127.0.0.2'),
    ('{.nodes[?(@.metadata.name!="127.0.0.1")].status.capacity.cpu}', '8'),
    ('{range .nodes[*]}{.metadata.name}{"\\t"}{.status.capacity.cpu}{"\\n"}{end}', '127.0.0.1\t4\n127.0.0.2\t8\n'),
    ('{.points[?(@.x==null)].id}', ERROR),
    ('{.mixed[?(@.x)]}', '{"x":[]}'),
    ('{.ints[?(@.x)]}', ''),
    ('{.nodes[*].metadata.labels.*}', '127.0.0.1 127.0.0.2'),
    ('{.nodes[0].status.capacity.*}', '4'),
    ('{.mixed[*].x}', '[]'),
    ('{.mixed[5].x[0]}', ERROR),
    ('{range .nodes[*]}{.metadata.name}{end}{range .ints[*]}{@},{end}', '127.0.0.1127.0.0.21,2,3,4,'),
    ('{range .nodes[*]}{range .status.addresses[*]}{.type}{end}|{end}', 'LegacyHostIP|LegacyHostIPanother|'),
    ("{.users[?(@.name=='e2e')]['name','user']}", 'e2e {"password":"secret","username":"admin"}'),
    ('{.points[?(@.y==-5)].id}', 'i1 i2'),
    ('{.points[?(@.x==@.y)].id}', ERROR),
    ('{.nodes[?(@.status.capacity.cpu=="8")].metadata.name}', '127.0.0.2'),
    ('{.strs[?(@>"one")]}', 'two three'),
    ('{.strs[?(@<="one")]}', 'one four'),
    ('{.ints[?(@!=2)]}', '1 3 4'),
    ('{.ints[1:3:1]}', '2 3'),
    ('{.ints[0:0]}', ''),
    ('{.ints[4:4]}', ''),
    ('{.ints[-4]}', '1'),
    ('{.ints[:-1:2]}', '1 3'),
    ('{.nodes[?(@..ready)].metadata.name}', '127.0.0.1 127.0.0.2'),
    ('{.s.*}', '104 195 169 108 108 111 32 60 38 62 9 34 113 34'),
    ('{.metadata.name.*}', '110 49'),
    ('{..ready}', 'true false'),
    ('{"a"}{"b"} {"c"}', 'ab c'),
    ('{.metadata.name} {.metadata.name}', 'n1 n1'),
    ('{ .metadata.name }', 'n1'),
    ('{.metadata . name}', ERROR),
    ('{.metadata.  name}', ERROR),
    ('{\'\\u263a\'}{"\\101\\x42"}', '☺AB'),
    ('{"\\""}{\'\\\'\'}', '"\''),
    ('{.metadata.name}{"', ERROR),
    ('{"a}', ERROR),
    ('{[*]}', ERROR),
    ('{.ints[*][0]}', ERROR),
    ('{.ints.*}', '1 2 3 4'),
    ('{.emap.*}', ''),
    ('{.empty.*}', ''),
    ('{.ints[1,3]}', '2 4'),
    ('{.ints[a,b]}', ERROR),
    ('{.ints[0:2,3]}', '1 2 4'),
    ("{.metadata['labels']}", '{}'),
    ("{.metadata['name']}", 'n1'),
    ("{['metadata']['name']}", 'n1'),
    ('{.metadata[*]}', ERROR),
    ('{.points[?(@.y > -1)].id}', 'i3 i5 i7'),
    ('{.points[?(@.y>+1)].id}', 'i3 i5 i7'),
    ('{.points[?(@.id>=i3)].id}', ERROR),
    ('{.points[?(@.id=="i3"||@.id=="i1")].id}', ERROR),
    ('{.points[?( @.id == "i3" )].id}', 'i3'),
    ('{range .ints[*]}{range .ints[*]}{@}{end};{end}', ';;;;'),
    ('{range .ints[0:2]}{@}{end}{end}', ERROR),
    ('{end}{range .ints[*]}{@}{end}', ERROR),
    ('{range}{.metadata.name}{end}', 'n1'),
    ('{range .ints[*]}{@}{range .empty[*]}x{end}{end}', '1234'),
    ('{range .nodes[*]}{.metadata.name}{range .status.addresses[0:1]}({.address}){end}{end}', '127.0.0.1(127.0.0.1)127.0.0.2(127.0.0.2)'),
    ('{.nodes[*].status.addresses[?(@.type=="another")].address}', '127.0.0.3'),
    ('{.ints[0] .ints[1]}', ''),
    ('{.ints[0]}{.ints[1]}', '12'),
    ('{.floats[?(@>2.5)]}', '3.3 4'),
    ('{.floats[?(@>2)]}', ERROR),
    ('{.ints[?(@>1.5)]}', ERROR),
    ('{.bools[?(@==true)]}', 'true true'),
    ('{.bools[?(@!=false)]}', 'true true'),
    ('{.bools[?(@=="true")]}', ERROR),
    ('{.nodes[0].status.ready}', 'true'),
    ('{.nul}', 'null'),
    ('{.mixed[?(@)]}', 'true one 1 1.1 null {"x":[]} []'),
    ('{.users[*].user}', '{} {"password":"secret","username":"admin"}'),
    ('{.ints[-1:-1]}', ''),
    ('{.ints[3:]}', '4'),
    ('{.ints[4:]}', ''),
    ('{.ints[5:]}', ERROR),
    ('{.ints[:0]}', ''),
    ('{.ints[:5]}', ERROR),
]

# the same with --allow-missing-template-keys=false
KUBECTL_STRICT = [
    ('{.hello}', ERROR),
    ('{.metadata.name}', 'n1'),
    ('{.points[?(@.z==1)].id}', ERROR),
    ('{.points[?(@.z)].id}', 'i2 i5'),
    ('{range .empty[*]}{.x}{end}done', ERROR),
    ('{range .ints[*]}{@}{end}', '1234'),
    ('{.nodes[*].metadata.nope}', ERROR),
    ('{.nul.x}', ERROR),
    ('{.points[*].z}', '1 1'),
    ('{.points[?(@.id=="i1")].id}', 'i1'),
]


# ---------------------------------------------------------------- what kubectl v1.34.1 prints

@pytest.mark.parametrize("template,expected", KUBECTL_CORPUS)
def test_matches_what_kubectl_printed(template, expected):
    assert render(template, DATA) == expected


@pytest.mark.parametrize("template,expected", KUBECTL_STRICT)
def test_matches_kubectl_without_missing_keys(template, expected):
    assert render(template, DATA, allow_missing_keys=False) == expected


def test_wildcard_over_a_map_visits_keys_in_sorted_order():
    # kubectl's order is random here (Go map iteration); sorted is this module's choice
    assert jsonpath("{.users[1].user.*}", DATA) == "secret admin"
    assert jsonpath("{.users[*].*}", DATA) == 'myself {} e2e {"password":"secret","username":"admin"}'


def test_range_without_end_runs_the_rest_per_item_then_once_more_on_the_object():
    assert jsonpath("{range .ints[*]}[{@}]", DATA) == "[1][2][3][4][" + go_json(DATA) + "]"


def test_empty_template_is_refused_like_kubectl():
    with pytest.raises(JSONPathError, match="template format specified but no template given"):
        jsonpath("", DATA)


def test_jsonpath_as_json_prints_each_result_list_indented():
    assert jsonpath("{.ints}", DATA, as_json=True) == "[\n    [\n        1,\n        2,\n        3,\n        4\n    ]\n]\n"
    assert jsonpath("{range .ints[0:2]}{@}{end}", DATA, as_json=True) == "[\n    1\n]\n[\n    2\n]\n"
    assert jsonpath("{.users[1]}{.nul}x{.empty}{.emap}", DATA, as_json=True) == (
        '[\n    {\n        "name": "e2e",\n        "user": {\n            "password": "secret",\n'
        '            "username": "admin"\n        }\n    }\n]\n[\n    null\n]\n[\n    "x"\n]\n[\n    []\n]\n'
        "[\n    {}\n]\n")
    assert jsonpath("{.hello}", DATA, as_json=True) == "[]\n"


# ---------------------------------------------------------------- Go's value printing

@pytest.mark.parametrize("value,text,as_json", [
    (1e6, "1e+06", "1000000"),
    (123456.5, "123456.5", "123456.5"),
    (1234567.5, "1.2345675e+06", "1234567.5"),
    (0.0001, "0.0001", "0.0001"),
    (0.00001, "1e-05", "0.00001"),
    (1e-7, "1e-07", "1e-7"),
    (1e21, "1e+21", "1e+21"),
    (1e20, "1e+20", "100000000000000000000"),
    (5e-324, "5e-324", "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308", "1.7976931348623157e+308"),
    (-0.0, "-0", "-0"),
    (4.0, "4", "4"),
    (-2.5, "-2.5", "-2.5"),
    (12345678901234567890, "1.2345678901234567e+19", "12345678901234567000"),   # beyond int64: float64
    (-7, "-7", "-7"),
    (True, "true", "true"),
    (None, "<nil>", "null"),
])
def test_numbers_print_like_go(value, text, as_json):
    assert go_sprint(value) == text
    assert go_json(value) == as_json


def test_json_escapes_like_go():
    assert go_json("a<b>&c\u2028\u2029\b\f\x01\t\n\r\"\\é☺") == \
        '"a\\u003cb\\u003e\\u0026c\\u2028\\u2029\\b\\f\\u0001\\t\\n\\r\\"\\\\é☺"'
    assert go_json({"b": [1, {"z": None, "a": {}}], "a": []}) == '{"a":[],"b":[1,{"a":{},"z":null}]}'


def test_sprint_prints_maps_and_lists_like_go():
    assert go_sprint({"b": [1, "x y", None], "a": {"k": 1.5}, "c": {}}) == "map[a:map[k:1.5] b:[1 x y <nil>] c:map[]]"
    assert go_sprint([]) == "[]"


def test_null_prints_null_and_strings_print_raw():
    assert jsonpath("{.nul} {.s}", DATA) == 'null héllo <&>\t"q"'


# ---------------------------------------------------------------- custom-columns

RUNS = [
    {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
     "metadata": {"name": "nightly", "labels": {"team": "ml", "pool": "a"}},
     "spec": {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}]},
     "status": {"phase": "Succeeded", "plan": {"summary": {"fragBeforePercent": 33}, "freedNodes": ["n1", "n2"]},
                "conditions": [{"type": "Planned", "status": "True"}, {"type": "Complete", "status": "True"}]}},
    {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
     "metadata": {"name": "a-much-longer-run-name"}, "spec": {"mode": "DryRun"}},
]


def test_custom_columns_align_like_kubectl_and_keep_headers_as_written():
    out = custom_columns("NAME:.metadata.name,mode:.spec.mode,Frag:.status.plan.summary.fragBeforePercent", RUNS)
    assert out == ("NAME                     mode      Frag\n"
                   "nightly                  Execute   33\n"
                   "a-much-longer-run-name   DryRun    <none>\n")


def test_custom_columns_join_values_with_commas_and_print_go_values():
    out = custom_columns("FREED:.status.plan.freedNodes,TYPES:.status.conditions[*].type,"
                         "PLANNED:{.status.conditions[?(@.type=='Planned')].status},LABELS:metadata.labels,"
                         "GOAL:.spec.goals[0]", RUNS)
    assert out == ("FREED     TYPES              PLANNED   LABELS                GOAL\n"
                   "[n1 n2]   Planned,Complete   True      map[pool:a team:ml]   map[resource:huawei.com/ascend-1980]\n"
                   "<none>    <none>             <none>    <none>                <none>\n")


def test_custom_columns_minimum_width_and_single_column():
    assert custom_columns("A:.spec.mode,B:.x", RUNS[:1]) == "A         B\nExecute   <none>\n"
    assert custom_columns("N:.metadata.name", RUNS) == "N\nnightly\na-much-longer-run-name\n"
    assert custom_columns("A:.a,B:.b", [{"a": "x", "b": "y"}]) == "A     B\nx     y\n"


def test_custom_columns_accept_an_object_a_list_object_and_no_headers():
    assert custom_columns("N:.metadata.name", RUNS[0]) == "N\nnightly\n"
    assert custom_columns("N:.metadata.name", {"kind": "List", "items": RUNS}) == \
        "N\nnightly\na-much-longer-run-name\n"
    assert custom_columns("N:.metadata.name,M:.spec.mode", RUNS, no_headers=True) == \
        "nightly                  Execute\na-much-longer-run-name   DryRun\n"
    assert custom_columns("N:.metadata.name", []) == "N\n"


def test_custom_columns_escape_terminal_characters_and_count_characters_not_bytes():
    objs = [{"a": "é\x1b[31mred\r", "b": 1}, {"a": "x", "b": 2}]
    assert custom_columns("A:.a,B:.b", objs) == "A              B\né^[[31mred\\r   1\nx              2\n"


@pytest.mark.parametrize("spec,message", [
    ("", "custom-columns format specified but no custom columns given"),
    ("NAME", "unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>"),
    ("A:{.a}}", "unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or "
                "'{.name1.name2}'"),
    ("A:.a[", "unterminated array"),
    ("A:.status.conditions[5]", "array index out of bounds: index 5, length 2"),
])
def test_custom_columns_errors(spec, message):
    with pytest.raises(JSONPathError) as exc:
        custom_columns(spec, RUNS)
    assert str(exc.value) == message


def test_tabwriter_column_blocks_and_remembered_widths():
    # a line without tabs ends a block (and flushes); widths are remembered across blocks
    assert tabwrite("a\tbb\tc\nlonger-cell\td\te\nno tabs\nx\ty\n") == (
        "a             bb    c\nlonger-cell   d     e\nno tabs\nx             y\n")
    assert tabwrite("a\tb") == "a     b"


# ---------------------------------------------------------------- -o name

def test_name_is_kind_dot_group_slash_name():
    assert name(RUNS[0]) == "repackrun.repack.volcano.sh/nightly"
    assert name({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}) == "pod/p"
    assert name({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}}) == "deployment.apps/<unknown>"


def test_names_prints_one_line_per_object():
    assert names(RUNS[0]) == "repackrun.repack.volcano.sh/nightly\n"
    assert names({"apiVersion": "v1", "kind": "List", "items": RUNS}) == \
        "repackrun.repack.volcano.sh/nightly\nrepackrun.repack.volcano.sh/a-much-longer-run-name\n"
    assert names([]) == ""


@pytest.mark.parametrize("obj,message", [
    ({"metadata": {"name": "x"}}, "missing apiVersion or kind; try GetObjectKind().SetGroupVersionKind() if you know the type"),
    ({"apiVersion": "v1", "metadata": {"name": "x"}}, "missing kind for resource with name x"),
])
def test_name_without_a_type_is_an_error(obj, message):
    with pytest.raises(JSONPathError) as exc:
        name(obj)
    assert str(exc.value) == message


# ---------------------------------------------------------------- packaging

def test_runs_in_the_zipapp_interpreter_without_site_packages():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from kubectl_repack import printing; "
            "print(printing.jsonpath('{range .items[*]}{.n}{\"\\\\n\"}{end}', {'items': [{'n': 1}, {'n': 2.5}]}), end=''); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('yaml', 'click', 'kubernetes')))")
    p = subprocess.run([sys.executable, "-I", "-S", "-c", code, REPO], capture_output=True, text=True, check=True)
    assert p.stdout == "1\n2.5\n[]\n"


@pytest.mark.parametrize("template,expected", [
    # inside a range, a JSON null item is Go's zero reflect.Value: printed "<no value>", and an
    # index into it makes kubectl panic (an error here)
    ('{range .mixed[*]}{@},{end}', 'true,one,1,1.1,<no value>,{"x":[]},[],'),
    ('{range .nul}{@}{end}', '<no value>'),
    ('{range .mixed[*]}{.x}{end}', '[]'),
    ('{range .points[*]}{range .x}[{@}]{end}{end}', '[4][-2][8][0][<no value>][1.5]'),
    ('{range .nul}{[0]}{end}', ERROR),
    ('{range .mixed[4]}{[?(@.a)]}{end}', ERROR),
])
def test_null_inside_a_range_is_no_value(template, expected):
    assert render(template, DATA) == expected


def test_infinities_print_like_go_and_cannot_be_json():
    assert go_sprint(float("inf")) == "+Inf" and go_sprint(float("-inf")) == "-Inf"
    assert go_sprint(float("nan")) == "NaN"
    assert jsonpath("{.a}", {"a": float("-inf")}) == "-Inf"
    with pytest.raises(JSONPathError, match=r"json: unsupported value: \+Inf"):
        jsonpath("{.a}", {"a": [float("inf")]})


def test_an_empty_selection_among_several_lists_ends_the_selection():
    # what kubectl v1.34.1 prints: client-go returns as soon as one input selects nothing
    data = {"ll": [[1, 2], [], [3]], "lm": [[1, 2], [3, 4, 5]]}
    assert jsonpath("{.ll[*][*]}", data) == "1 2"
    assert jsonpath("{.lm[*][1:1]}|{.lm[*][-1]}", data) == "|2 5"
    with pytest.raises(JSONPathError) as exc:
        jsonpath("{.ll[*][0:1]}", data)
    assert exc.value.reason == "array index out of bounds: index 0, length 0"
