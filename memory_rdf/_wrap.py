"""Text wrapped to terminal cells, CJK-aware: the one wrapping rule of the package.

A CJK character takes two cells (rich's ``cell_len``) and a line may break between two of them
as well as at spaces (rich itself breaks only at spaces, which leaves ragged Chinese lines);
closing punctuation such as "，" never starts a line. The demo's panels
(:func:`wrap_text`) and the graph's node labels (:func:`wrap_label`) both wrap here.

>>> wrap_lines("我们用 PostgreSQL 存订单，Redis 做缓存", 12)
['我们用', 'PostgreSQL', '存订单，', 'Redis 做缓存']
>>> wrap_label("note 191: the cache service", width=22)
['note 191: the', 'cache service']
"""

from __future__ import annotations

import re

from rich.cells import cell_len

__all__ = ["cell_len", "wrap_label", "wrap_lines", "wrap_text"]

# A run of spaces, a run of non-CJK non-space characters (a word), or one character.
_TOKEN = re.compile(r"\s+|[^\s\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]+|.")

_NO_LINE_START = frozenset("，。、；：？！）」』”’》〉】,.;:?!)")


def wrap_lines(text: str, width: int) -> list[str]:
    """``text`` as lines of at most ``width`` cells (at least 2), breaking at spaces and
    between CJK characters; a word longer than a line is folded; newlines are kept."""
    width = max(width, 2)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        current = ""
        for token in _TOKEN.findall(paragraph):
            if cell_len(current) + cell_len(token) <= width:
                current += token
                continue
            if token.isspace():
                lines.append(current.rstrip())
                current = ""
                continue
            carry = ""
            if token in _NO_LINE_START and len(current) > 1 and cell_len(current[-1]) == 2:
                carry, current = current[-1], current[:-1]  # keep "，" off the line start
            if current.strip():
                lines.append(current.rstrip())
            token = carry + token
            while cell_len(token) > width:  # a word longer than a line: fold it
                cut = len(token)
                while cut > 1 and cell_len(token[:cut]) > width:
                    cut -= 1
                lines.append(token[:cut])
                token = token[cut:]
            current = token
        lines.append(current.rstrip())
    return lines


def wrap_text(text: str, width: int) -> str:
    """:func:`wrap_lines` joined with newlines (for a terminal panel)."""
    return "\n".join(wrap_lines(text, width))


def wrap_label(text: str, width: int = 22, lines: int = 2) -> list[str]:
    """``text`` on one line, as at most ``lines`` balanced lines of at most ``width`` cells
    (breaking inside a word only when no line width avoids it), or cut with "…"."""
    words = " ".join(text.split())
    total = cell_len(words)
    if total <= width:
        return [words]
    best: tuple[int, int, list[str]] | None = None
    for w in range(min(width, max(-(-total // lines) + 1, 8)), width + 1):
        out = [line for line in wrap_lines(words, w) if line]
        if len(out) > lines:
            continue
        pos, hard = 0, 0  # hard: breaks inside a word (not at a space)
        for line in out[:-1]:
            pos = words.index(line, pos) + len(line)
            hard += pos < len(words) and words[pos] != " "
        score = (hard, max(cell_len(line) for line in out))
        if best is None or score < best[:2]:
            best = (*score, out)
    if best is not None:
        return best[2]
    out = [line for line in wrap_lines(words, width) if line]
    if len(out) <= lines:
        return out
    last = out[lines - 1]
    while last and cell_len(last) + 1 > width:
        last = last[:-1]
    return [*out[: lines - 1], last.rstrip() + "…"]
