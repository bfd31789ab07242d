"""How ``gpufleet --help`` reads: the module docstrings as plain text, every default shown.

The commands' descriptions are their module docstrings, written for Sphinx-style readers
(````name````); help on a terminal shows them without the markup, keeps their paragraphs
and lists, and says each option's default unless its help already does.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import Any

_LITERAL = re.compile(r"``([^`]+)``")
_PARAGRAPH = re.compile(r"\n\s*\n")


def plain(text: str) -> str:
    """``text`` without reStructuredText literal markup: ````x```` becomes ``x``."""
    return _LITERAL.sub(r"\1", text)


class HelpFormatter(argparse.HelpFormatter):
    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Each paragraph filled on its own; a paragraph of list items (``- ...``) or
        indented lines keeps its lines."""
        out = []
        for paragraph in _PARAGRAPH.split(textwrap.dedent(plain(text)).strip()):
            lines = paragraph.splitlines()
            if any(line.lstrip().startswith("- ") or line.startswith(" ") for line in lines):
                out.append("\n".join(indent + line for line in lines))
            else:
                filled = textwrap.fill(" ".join(paragraph.split()), width, initial_indent=indent,
                                       subsequent_indent=indent)  # fmt: skip
                out.append(filled)
        return "\n\n".join(out)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = plain(action.help or "")
        quiet = action.default is None or action.default is False  # 0 is a default to show
        if quiet or action.default == argparse.SUPPRESS or not action.option_strings:
            return text
        if "default" in text:
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose subcommands' parsers format help the same way."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
