"""Quantity grammar and scaling, held to apimachinery's ParseQuantity and the scheduler's Value/MilliValue."""
from fractions import Fraction as F

import pytest

from planner.quantity import format_amount, parse_quantity, scaled

PARSE = [
    ("plain-int", "8", F(8)),
    ("zero", "0", F(0)),
    ("milli", "250m", F(1, 4)),
    ("nano", "1n", F(1, 10 ** 9)),
    ("micro", "5u", F(5, 10 ** 6)),
    ("kilo", "2k", F(2000)),
    ("mega", "3M", F(3 * 10 ** 6)),
    ("giga", "1G", F(10 ** 9)),
    ("tera", "1T", F(10 ** 12)),
    ("peta", "1P", F(10 ** 15)),
    ("exa", "1E", F(10 ** 18)),
    ("kibi", "1Ki", F(1024)),
    ("mebi", "1Mi", F(2 ** 20)),
    ("gibi-decimal", "1.5Gi", F(3 * 2 ** 29)),
    ("tebi", "2Ti", F(2 * 2 ** 40)),
    ("pebi", "1Pi", F(2 ** 50)),
    ("exbi", "1Ei", F(2 ** 60)),
    ("exp-lower", "1e3", F(1000)),
    ("exp-upper", "1E3", F(1000)),
    ("exp-plus", "2e+2", F(200)),
    ("exp-minus", "5e-1", F(1, 2)),
    ("exp-decimal", "1.5e3", F(1500)),
    ("leading-dot", ".5", F(1, 2)),
    ("trailing-dot", "5.", F(5)),
    ("trailing-dot-suffix", "1.G", F(10 ** 9)),
    ("decimal-fraction", "0.1", F(1, 10)),
    ("plus-sign", "+3", F(3)),
    ("minus-sign", "-2Ki", F(-2048)),
    ("leading-zeros", "007", F(7)),
    ("int-value", 4, F(4)),
    ("float-value", 0.5, F(1, 2)),
    ("below-nano-rounds-up", "0.1n", F(1, 10 ** 9)),
    ("tiny-exponent-rounds-up", "1e-12", F(1, 10 ** 9)),
    ("negative-rounds-away-from-zero", "-0.1n", F(-1, 10 ** 9)),
    ("binary-capped-at-maxint64", "9Ei", F(2 ** 63 - 1)),
    ("zero-with-huge-exponent", "0e99999", F(0)),
]


@pytest.mark.parametrize("text,want", [c[1:] for c in PARSE], ids=[c[0] for c in PARSE])
def test_parse(text, want):
    assert parse_quantity(text) == want


def test_same_amount_in_three_spellings():
    assert parse_quantity("0.1") == parse_quantity("100m") == parse_quantity("1e-1")


INVALID = [
    ("two-dots", "1.2.3"),
    ("suffix-without-number", "Gi"),
    ("space-before-suffix", "1 Gi"),
    ("exponent-without-digits", "1e"),
    ("exponent-sign-without-digits", "-3.01e-"),
    ("double-sign", "--1"),
    ("plus-in-middle", "1+1.0M"),
    ("lowercase-mi", "0.1mi"),
    ("unknown-suffix", "1K"),
    ("lone-i", "1i"),
    ("binary-bytes", "1KiB"),
    ("leading-space", " 1"),
    ("trailing-space", "1 "),
    ("trailing-newline", "1\n"),
    ("empty", ""),
    ("lone-dot", "."),
    ("lone-sign", "-"),
    ("words", "aoeu"),
    ("underscore", "1_000"),
    ("fullwidth-digit", "\uff11"),
    ("exponent-beyond-int32", "1e2147483648"),
    ("exponent-absurd", "1e99999"),
    ("bool-true", True),
    ("bool-false", False),
    ("none", None),
    ("list", [1]),
    ("float-nan", float("nan")),
    ("float-inf", float("inf")),
]


@pytest.mark.parametrize("text", [c[1] for c in INVALID], ids=[c[0] for c in INVALID])
def test_rejects(text):
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text)


SCALED = [
    ("cpu-whole", "cpu", "2", 2000),
    ("cpu-milli", "cpu", "250m", 250),
    ("cpu-decimal", "cpu", "0.5", 500),
    ("cpu-sub-milli-rounds-up", "cpu", "0.1m", 1),
    ("cpu-micro-rounds-up", "cpu", "1500u", 2),
    ("memory-binary", "memory", "1Gi", 2 ** 30),
    ("memory-fraction-rounds-up", "memory", "0.1", 1),
    ("memory-milli-rounds-up", "memory", "1500m", 2),
    ("extended-int", "nvidia.com/gpu", "8", 8),
    ("extended-rounds-up", "nvidia.com/gpu", "0.5", 1),
    ("pods", "pods", "110", 110),
    ("ephemeral", "ephemeral-storage", "10G", 10 ** 10),
    ("negative-memory", "memory", "-1.5", -1),
]


@pytest.mark.parametrize("resource,text,want", [c[1:] for c in SCALED], ids=[c[0] for c in SCALED])
def test_scaled(resource, text, want):
    assert scaled(resource, text) == want


FORMAT = [
    ("cpu-whole", "cpu", 2000, "2"),
    ("cpu-milli", "cpu", 1500, "1500m"),
    ("cpu-zero", "cpu", 0, "0"),
    ("memory-gi", "memory", 2 ** 31, "2Gi"),
    ("memory-mi", "memory", 3 * 2 ** 20, "3Mi"),
    ("memory-ki", "memory", 3072, "3Ki"),
    ("memory-not-whole-ki", "memory", 1536, "1536"),
    ("memory-plain", "memory", 1000, "1000"),
    ("cards", "huawei.com/ascend-1980", 8, "8"),
]


@pytest.mark.parametrize("resource,amount,want", [c[1:] for c in FORMAT], ids=[c[0] for c in FORMAT])
def test_format_amount(resource, amount, want):
    assert format_amount(resource, amount) == want


@pytest.mark.parametrize("resource,text", [("cpu", "1500m"), ("memory", "3Gi"), ("memory", "7"),
                                           ("example.com/foo", "12")], ids=["cpu", "memory-gi", "memory-7", "ext"])
def test_format_round_trips(resource, text):
    assert scaled(resource, format_amount(resource, scaled(resource, text))) == scaled(resource, text)


@pytest.mark.parametrize("value, cards", [("0.0000001", 0), ("7.9", 7), ("8", 8), ("1k", 1000), (3, 3)])
def test_a_budget_rounds_down(value, cards):
    """A budget is a limit: a fraction of a card allows no card (requests round up instead)."""
    from planner.quantity import scaled_limit
    assert scaled_limit("huawei.com/ascend-1980", value) == cards


def test_a_negative_budget_is_refused():
    from planner.quantity import scaled_limit
    with pytest.raises(ValueError, match="negative"):
        scaled_limit("nvidia.com/gpu", "-1")
