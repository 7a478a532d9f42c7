"""Secrets in tables: the values of a column whose header names a credential.

A table is a header row and the rows under it, its cells split by one delimiter: CSV (``,``,
double quotes around a cell allowed), TSV (a tab), or pipes (``psql``'s aligned output, whose
header is followed by a ``---+---`` rule, and Markdown's ``| a | b |`` with its ``|---|---|``
rule). The header is a row of names (two or more, each a short identifier, on a line the line
before it does not match in shape: the first row of its table); a column whose name is a
credential name (:func:`.secret_keys.classify`, the key-name rules) has every value redacted, one
whose name is credential-ish only the values that look generated. A value with whitespace in it
is prose, not a password, and is kept, as is one under 8 characters (the shortest secret the
redactor looks for: a table of tokens' names is no table of tokens). The rows end at the first
line that has another number of cells (a blank line, ``(1 row)``).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable, Iterator
from typing import Final

from .secret_keys import ValueSpan, classify, looks_random, worth_redacting

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_ .-]{0,63}")
_RULE: Final = re.compile(r"[ \t|+:=-]*-[ \t|+:=-]*")  # ------+------, |---|:--:|
_DELIMITERS: Final = ("|", "\t", ",")
_SHORTEST: Final = 8  # the shortest secret the redactor looks for (a cell: a word, an id)

_Cell = tuple[int, int]  # where a cell's text is, its spaces and quotes left out


def table_spans(text: str, positions: Iterable[int]) -> Iterator[ValueSpan]:
    """The values under credential-named columns of the tables whose header holds one of
    ``positions`` (where a key word occurs, in order)."""
    if "\n" not in text:
        return  # one line is no table
    done = 0  # where the last line or table looked at ends
    for pos in positions:
        if pos < done:
            continue
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        done = end
        delimiter = _delimiter(text, start, end)
        if delimiter is None or _row_above(text, start, delimiter):
            continue
        header = _cells(text, start, end, delimiter)
        columns = _credential_columns(text, header)
        if columns:
            done = yield from _column_values(text, end, delimiter, len(header), columns)
            done = max(done, end)


def _delimiter(text: str, start: int, end: int) -> str | None:
    """The delimiter of the row ``text[start:end]``, or ``None``."""
    for delimiter in _DELIMITERS:
        if text.find(delimiter, start, end) >= 0:
            return delimiter
    return None


def _row_above(text: str, start: int, delimiter: str) -> bool:
    """Whether the line before ``start`` is a row like the one at ``start`` (which is then no
    header: a header starts its table)."""
    if start == 0:
        return False
    above = text.rfind("\n", 0, start - 1) + 1
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    return text.count(delimiter, above, start - 1) == text.count(delimiter, start, end)


def _credential_columns(text: str, header: list[_Cell]) -> list[tuple[int, int, str]]:
    """The credential columns of a header, as ``(index, tier, kind)``; none when the row is not a
    header (fewer than two names, or a cell that is no name)."""
    names = 0
    columns = []
    for index, (start, end) in enumerate(header):
        if start == end:
            continue
        name = text[start:end]
        if _NAME.fullmatch(name) is None:
            return []
        names += 1
        tier = classify(name)
        if tier is not None:
            columns.append((index, *tier))
    return columns if names >= 2 else []


def _column_values(
    text: str, end: int, delimiter: str, width: int, columns: list[tuple[int, int, str]]
) -> Generator[ValueSpan, None, int]:
    """The values of ``columns`` in the rows after a header that ends at ``end``; returns where
    the table ends."""
    first = True
    while end < len(text):
        start = end + 1
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if first and _RULE.fullmatch(text, start, end) is not None:
            first = False
            continue  # the header's rule
        first = False
        if text.find(delimiter, start, end) < 0:
            return start
        row = _cells(text, start, end, delimiter)
        if len(row) != width:
            return start
        for index, tier, kind in columns:
            a, b = row[index]
            value = text[a:b]
            if len(value) < _SHORTEST or any(c.isspace() for c in value):
                continue  # too short to be looked for anywhere, or prose
            if looks_random(value) if tier == 2 else worth_redacting(value, tier, code=False):
                yield ValueSpan(a, b, kind)
    return end


def _cells(text: str, start: int, end: int, delimiter: str) -> list[_Cell]:
    """The cells of the row ``text[start:end]``: split at ``delimiter`` (not inside a CSV
    cell's double quotes), each without its spaces and quotes; a pipe row's outer pipes
    (``| a | b |``) open and close it, they start no cell."""
    cells: list[_Cell] = []
    at = start
    while True:
        while at < end and text[at] in " \t" and text[at] != delimiter:
            at += 1
        if delimiter == "," and at < end and text[at] == '"':
            close = at + 1
            while True:
                close = text.find('"', close, end)
                if close < 0 or not text.startswith('""', close):
                    break
                close += 2
            if close > 0:
                cells.append((at + 1, close))
                stop = text.find(delimiter, close, end)
                if stop < 0:
                    return cells
                at = stop + 1
                continue
        stop = text.find(delimiter, at, end)
        cell_end = end if stop < 0 else stop
        stripped = cell_end
        while stripped > at and text[stripped - 1] in " \t\r":
            stripped -= 1
        cells.append((at, stripped))
        if stop < 0:
            break
        at = stop + 1
    if delimiter == "|":
        if cells and cells[0][0] == cells[0][1] and text[start:end].lstrip().startswith("|"):
            cells.pop(0)
        if cells and cells[-1][0] == cells[-1][1] and text[start:end].rstrip().endswith("|"):
            cells.pop()
    return cells
