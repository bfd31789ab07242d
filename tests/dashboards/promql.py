"""Just enough PromQL reading for the catalogue tests: which metrics an expression selects,
with which label matchers, and which labels it groups or joins on.

Not a parser: a tokenizer that knows strings, ranges, numbers (with duration units),
function calls, grouping clauses and selector braces, which is all our queries use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TOKEN = re.compile(
    r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<range>\[[^\]]*\])
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?:ms|s|m|h|d|w|y)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|=)
  | (?P<punct>[{}(),])
  | (?P<space>\s+)
  | (?P<other>.)
    """,
    re.VERBOSE,
)
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2"}
#: aggregation operators, which may take a grouping clause before their parentheses
AGGREGATIONS = {"sum", "avg", "min", "max", "count", "topk", "bottomk", "group", "stddev"}


@dataclass
class Matcher:
    label: str
    op: str
    value: str


@dataclass
class Selector:
    metric: str
    matchers: list[Matcher] = field(default_factory=list)


@dataclass
class Query:
    selectors: list[Selector]
    #: labels named in by/without/on/ignoring/group_left/group_right clauses
    grouping: set[str]


def _tokens(expr: str) -> list[tuple[str, str]]:
    found = [(m.lastgroup or "", m.group()) for m in TOKEN.finditer(expr)]
    return [(kind, text) for kind, text in found if kind != "space"]


def _matchers(tokens: list[tuple[str, str]], i: int) -> tuple[list[Matcher], int]:
    """Matchers from the token after ``{`` up to ``}``; returns them and the index after."""
    matchers: list[Matcher] = []
    while tokens[i][1] != "}":
        if tokens[i][1] == ",":
            i += 1
            continue
        label, op, value = tokens[i][1], tokens[i + 1][1], tokens[i + 2][1]
        matchers.append(Matcher(label, op, value[1:-1]))
        i += 3
    return matchers, i + 1


def _label_list(tokens: list[tuple[str, str]], i: int) -> tuple[set[str], int]:
    labels: set[str] = set()
    while tokens[i][1] != ")":
        if tokens[i][0] == "ident":
            labels.add(tokens[i][1])
        i += 1
    return labels, i + 1


def parse(expr: str) -> Query:
    tokens = [*_tokens(expr), ("end", "")]
    selectors: list[Selector] = []
    grouping: set[str] = set()
    i = 0
    while tokens[i][0] != "end":
        kind, text = tokens[i]
        following = tokens[i + 1][1]
        if kind == "ident" and text in GROUPING:
            if following == "(":
                labels, i = _label_list(tokens, i + 2)
                grouping |= labels
            else:
                i += 1
        elif kind == "ident" and (following == "(" or text in KEYWORDS | AGGREGATIONS):
            i += 2 if text == "offset" else 1
        elif kind == "ident":
            selector = Selector(text)
            i += 1
            if following == "{":
                selector.matchers, i = _matchers(tokens, i + 1)
            selectors.append(selector)
        elif text == "{":
            raise ValueError(f"selector without a metric name in {expr!r}")
        else:
            i += 1
    return Query(selectors, grouping)
