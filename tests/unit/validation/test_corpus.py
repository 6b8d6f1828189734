"""The invalid-input corpus: every file is refused with exactly the error lines it expects.

A YAML case states its expected lines in `# expect:` comments at its top; a JSON case (JSON has no
comments) in a sibling `<file>.expect`. `{src}` stands for the file name, the source name the
validator is given. The valid corpus (config/samples from the seed, and tests/unit/validation/valid)
must pass unchanged.
"""
from pathlib import Path

import pytest

from kubectl_repack.errors import ValidationError
from kubectl_repack.schema import validate_run_text

HERE = Path(__file__).parent
REPO = HERE.parents[2]
INVALID = sorted(p for p in (HERE / "invalid").iterdir() if p.suffix in (".yaml", ".json"))
# RepackPolicy samples are validated by tests/unit/validation/test_policy_schema.py
POLICY_SAMPLES = sorted(p for p in (REPO / "config" / "samples").glob("*.yaml") if "\nkind: RepackPolicy\n" in p.read_text())
VALID = sorted(set((REPO / "config" / "samples").glob("*.yaml")) - set(POLICY_SAMPLES)) + sorted((HERE / "valid").iterdir())
SEED_SAMPLES = {"ascend-npu-dryrun", "ascend-scoped-dryrun", "ascend-guarded-dryrun",
                "ascend-execute-001", "ascend-complete-execute-001"}
EXPECT = "# expect: "


def expected_lines(path):
    sidecar = path.with_name(path.name + ".expect")
    if sidecar.exists():
        lines = sidecar.read_text().splitlines()
    else:
        lines = [line[len(EXPECT):] for line in path.read_text().splitlines()
                 if line.startswith(EXPECT)]
    return [line.replace("{src}", path.name) for line in lines]


def test_corpus_is_large_enough_and_every_case_states_its_errors():
    assert len(INVALID) >= 30
    for path in INVALID:
        assert expected_lines(path), f"{path.name} states no expected error"


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_run_is_refused_with_exactly_the_expected_errors(path):
    with pytest.raises(ValidationError) as refused:
        validate_run_text(path.read_text(), path.name)
    assert refused.value.errors == expected_lines(path)
    assert str(refused.value) == "; ".join(expected_lines(path))


def test_seed_samples_are_all_present():
    assert {p.stem for p in (REPO / "config" / "samples").glob("*.yaml")} >= SEED_SAMPLES


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_run_passes_and_is_returned(path):
    run = validate_run_text(path.read_text(), path.name)
    assert run["kind"] == "RepackRun"
    assert run["spec"]["mode"] in ("DryRun", "Execute")
    if path.parent.name == "samples":
        assert run["metadata"]["name"] == path.stem, "a sample is named like its file"
