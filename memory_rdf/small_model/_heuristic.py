"""The built-in offline small model: deterministic heuristics over jieba word segmentation.

- ``segment``: cuts chat text at message boundaries and sentence ends into pieces of at most
  ``max_segment_chars`` characters, merging short consecutive messages that share a word.
- ``process``: keywords by TF-IDF (how rare a word is in running text: jieba's dictionary
  frequencies for Chinese, ``data/english_frequencies.txt`` for English; nouns preferred), a
  phrase of at most 20 characters, and extractive compression that keeps the clauses whose
  words not yet kept weigh most for their length (words that carry facts — names, numbers,
  dates, places — weigh more), each kept line opening with who said it (the speaker's name
  that opened it, "Caroline: ", else its role label) and holding two words at least: a gist,
  never a lone word. :meth:`HeuristicModel.shortest_length` says how short that can get; the
  manager forgets a node whose target is shorter (SPEC §5.2).
- ``relation``: 回应 / 提到 / 涉及 (answers / mentions / relates to for English) / "" from shared
  words and question shape, named in the language of the node's content.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from memory_rdf._resources import data_text
from memory_rdf._text import (
    CHINESE_STOP_WORDS,
    ENGLISH_STOP_WORDS,
    HAN,
    RELATION_NAMES,
    ROLE_NAMES,
    WORD_CHAR,
    Token,
    cut_han,
    is_cjk_text,
    is_han,
    is_word_char,
    jieba_module,
    normalize,
    split_clauses,
    split_sentences,
    stem,
    strip_role_prefixes,
    text_units,
    tokenize,
    tokens,
    word_set,
)
from memory_rdf._types import KEYWORDS_MAX, KEYWORDS_MIN, LENGTH_TOLERANCE, PHRASE_MAX, Processed

__all__ = ["ENGLISH_RELATIONS", "RELATIONS", "HeuristicModel"]

#: Relation names ``relation`` can return for Chinese content (besides "" for none), strongest
#: first: 回应 the node answers a question in the focus; 提到 the node mentions a keyword of the
#: focus; 涉及 they share other content words.
RELATIONS: tuple[str, ...] = ("回应", "提到", "涉及")
#: The same relations named for English content: the display forms of SPEC §5.4 v3.
ENGLISH_RELATIONS: tuple[str, ...] = tuple(RELATION_NAMES[name] for name in RELATIONS)

_PHRASE_MIN = 10

_ROLE_LINE_RE = re.compile(r"(user|assistant|system):[ \t]?")
# A speaker's name opening a message's text ("Caroline: ", "Zhang Wei: "): one to three
# capitalized words and a colon, kept as who said it when the text is shortened.
_NAME_LABEL_RE = re.compile(r"[ \t]*([A-Z][A-Za-z'’\-]*(?: [A-Z][A-Za-z'’\-]*){0,2}):[ \t]+(?=\S)")
# Words that open a line with a colon without naming who speaks ("Noted: green tea from now on").
_NOT_NAMES = ENGLISH_STOP_WORDS | word_set(
    """
    noted note notes update updates answer question yes no sure ok okay done thanks reminder
    summary edit ps important tip warning example budget status result results fix plan idea
    problem solution reason conclusion goal todo agenda next first second finally also update
    tldr fyi btw correction source step well right great good perfect agreed deal
    """
)
_WORD_RE = re.compile(rf"([{HAN}]+)|({WORD_CHAR}+(?:[.\-_'’+]{WORD_CHAR}+)*)")
# Trailing clause marks that look wrong at the end of a shortened text.
_TRAIL = "，、,;；：: \t\n"
_PHRASE_TRAIL = _TRAIL + "。.!?！？…"

# jieba tags counted as nouns or noun phrases (words missing from the dictionary, such as new
# names, count as nouns too).
_NOUN_TAGS = frozenset({"n", "nr", "nrfg", "nrt", "ns", "nt", "nz", "ng", "nw", "vn", "eng", "j"})
# jieba tags of words that carry facts: numbers and quantities, times, people, places.
_FACT_TAGS = frozenset({"m", "mq", "t", "nr", "nrfg", "nrt", "ns"})
#: What a word that carries a fact (a number, a date or time, a name, a place) adds to its
#: weight when a text is shortened: compression keeps who, what, when and how much.
_FACT_BONUS = 1.0
# English words that rarely make good keywords (kept by tokenize, ranked low here).
_WEAK_ENGLISH = word_set(
    """
    think know need needs want wants like get gets got make makes made use used using go going
    goes went come came say said see saw look let lets sure right well good great fine nice bad
    new next last first one two three way thing things lot lots really actually maybe perhaps
    something anything everything nothing someone anyone everyone now today tomorrow yesterday
    still already yet even much many every us able done take took put give keep try tried
    mean means means work works please thanks sorry
    """
)
_WEAK_CHINESE = word_set(
    """
    时候 东西 事情 地方 情况 办法 明白 样子 部分 方面 意思 问题 时间 东东 人员 有人 那边 这边
    """
)
_QUESTION_RE = re.compile(
    r"[?？]|吗|什么|怎么|怎样|如何|为什么|为何|哪|多少|是否|是不是|有没有|能不能|可不可以|"
    r"(?:^|[.!?。！？\n]\s*|:\s)(?:what|how|why|when|where|who|which|whose|can|could|should|"
    r"would|will|do|does|did|is|are|shall)\b",
    re.IGNORECASE,
)
_QUESTION_MARK_RE = re.compile(r"[?？]")


# --------------------------------------------------------------------------- lexicon


#: How much rarer than the rarest listed word an English word missing from the list is taken
#: to be (in Zipf units, log10): names, product names, technical terms, numbers and versions.
_ENGLISH_UNKNOWN_BELOW = 0.5
_ENGLISH_PARTS_RE = re.compile(r"[.\-_+#']+")
_CONTRACTION_RE = re.compile(r"(?:n't|'(?:s|d|m|ll|ve|re))$")


def _english_idf() -> tuple[dict[str, float], float]:
    """``(idf of each listed English word, idf of a word missing from the list)``, in nats:
    -ln of the word's share of running text, from ``data/english_frequencies.txt`` (Zipf
    values: log10 of occurrences per billion words), as jieba's frequencies give Chinese's."""
    idf: dict[str, float] = {}
    lowest = 9.0
    for line in data_text("english_frequencies.txt").splitlines():
        if not line or line.startswith("#"):
            continue
        zipf_text, _, words = line.partition(" ")
        zipf = float(zipf_text)
        lowest = min(lowest, zipf)
        value = (9.0 - zipf) * math.log(10)
        for word in words.split():
            idf[word] = value
    return idf, (9.0 - (lowest - _ENGLISH_UNKNOWN_BELOW)) * math.log(10)


class _Lexicon:
    """Dictionary knowledge: which Chinese words are not nouns, and how rare a word is (jieba's
    frequencies for Chinese, ``data/english_frequencies.txt`` for English)."""

    def __init__(self) -> None:
        jieba = jieba_module()
        dt = jieba.dt
        self.freq: dict[str, int] = getattr(dt, "FREQ", {}) or {}
        total = getattr(dt, "total", 0) or 0
        self.log_total = math.log(total) if total > 0 else math.log(6e7)
        # Words absent from the dictionary (names, product names, English terms) get the idf of
        # a fairly rare word.
        self.unknown_idf = self.log_total - math.log(300)
        self.non_nouns: frozenset[str] = frozenset()
        self.facts: frozenset[str] = frozenset()
        path = os.path.join(os.path.dirname(jieba.__file__), "dict.txt")
        try:
            with open(path, encoding="utf-8") as f:
                self.non_nouns = frozenset(
                    parts[0]
                    for parts in (line.split() for line in f)
                    if len(parts) >= 3 and parts[2] not in _NOUN_TAGS
                )
                f.seek(0)
                self.facts = frozenset(
                    parts[0]
                    for parts in (line.split() for line in f)
                    if len(parts) >= 3 and len(parts[0]) > 1 and parts[2] in _FACT_TAGS
                )
        except OSError:  # pragma: no cover - a jieba install without its dictionary file
            pass
        self.english, self.english_unknown_idf = _english_idf()

    def idf(self, word: str, han: bool = True) -> float:
        """-ln of the share of running text that ``word`` (a normalized token) makes up: a rare
        word says more. A Chinese word absent from jieba's dictionary (a new name) counts as a
        fairly rare word; an English word absent from the English list (a name, a product, a
        technical term, a number or a version) as rarer than any listed word."""
        if not han:
            return self._english_idf(word)
        f = self.freq.get(word, 0)
        if f <= 0:
            return self.unknown_idf
        return max(self.log_total - math.log(f), 1.0)

    def _english_idf(self, word: str) -> float:
        known = self.english.get(word)
        if known is not None:
            return known
        head = _CONTRACTION_RE.sub("", word)  # "hadn't", "we'll": as rare as "had", "we"
        if head != word and head in self.english:
            return self.english[head]
        parts = [p for p in _ENGLISH_PARTS_RE.split(head) if p]
        if len(parts) > 1:  # "long-term", "node.js": as rare as its rarest part
            return max(self.english.get(p, self.english_unknown_idf) for p in parts)
        return self.english_unknown_idf


_lexicon_lock = threading.Lock()
_lexicon: _Lexicon | None = None


def _lex() -> _Lexicon:
    global _lexicon
    if _lexicon is None:
        with _lexicon_lock:
            if _lexicon is None:
                _lexicon = _Lexicon()
    return _lexicon


# --------------------------------------------------------------------------- analysis


def _word_spans(s: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each word of ``s`` as written, stop words included (jieba's words
    inside Chinese)."""
    out: list[tuple[int, int]] = []
    for m in _WORD_RE.finditer(s):
        if m.group(1) is None:
            out.append(m.span())
            continue
        pos = m.start()
        for word in cut_han(m.group(1)):
            out.append((pos, pos + len(word)))
            pos += len(word)
    return out


@dataclass(frozen=True)
class _Clause:
    msg: int  # index of the message (line group) it belongs to
    text: str  # as written, with its punctuation and trailing whitespace
    tokens: tuple[str, ...]  # normalized tokens (for relations)
    terms: tuple[str, ...]  # keyword units (tokens, with names grouped)
    words: int  # words as written, stop words included; 0 when all are stop words
    label: bool = False  # the speaker's name that opens its message ("Caroline: ")


@dataclass(frozen=True)
class _Analysis:
    prefixes: tuple[str, ...]  # per message: "user: " or ""
    labels: tuple[str, ...]  # per message: who said it ("Caroline: ", else "user: ", else "")
    clauses: tuple[_Clause, ...]
    keywords: tuple[str, ...]  # normalized tokens, best first
    display: tuple[str, ...]  # the same keywords as written
    weights: tuple[float, ...]  # per clause: how much of the text's meaning it carries
    term_weights: dict[str, float]  # per keyword unit: what it adds to the clauses holding it
    token_set: frozenset[str]  # significant content tokens
    question: bool  # asks something
    has_question_mark: bool


def _parse_messages(text: str) -> list[tuple[str, str]]:
    """``[(prefix, body)]``: a line starting with ``role:`` opens a message; other lines
    continue the current one (or form a message without prefix)."""
    msgs: list[tuple[str, str]] = []
    for line in text.split("\n"):
        m = _ROLE_LINE_RE.match(line)
        if m:
            msgs.append((f"{m.group(1)}: ", line[m.end() :]))
        elif msgs:
            prefix, body = msgs[-1]
            msgs[-1] = (prefix, body + "\n" + line)
        else:
            msgs.append(("", line))
    return msgs


def _significant(tok: str) -> bool:
    return not (len(tok) == 1 and tok.isascii()) and tok not in ROLE_NAMES


def _tier(tok: str, han: bool, lex: _Lexicon) -> int:
    """0: noun-like; 1: other content word; 2: weak (single characters)."""
    if han:
        if len(tok) == 1:
            return 2
        return 1 if tok in lex.non_nouns or tok in _WEAK_CHINESE else 0
    if len(tok) == 1:
        return 2
    if not any(c.isalpha() for c in tok):
        return 1  # numbers, dates, versions
    if tok in _WEAK_ENGLISH or (len(tok) > 4 and tok.endswith(("ly", "ed"))):
        return 1
    return 0


def _is_title(t: Token) -> bool:
    s = t.surface
    return (
        not t.han
        and s[:1].isupper()
        and s.isalpha()
        and (len(s) == 1 or s[1:].islower())
        and t.text not in _WEAK_ENGLISH
    )


class _Term(NamedTuple):
    text: str  # normalized; words of a name joined by one space
    surface: str
    han: bool
    marked: bool  # written like a name or a term (JWT, PostgreSQL, Zhang Wei)


def _terms(toks: Sequence[Token], norm: str) -> list[_Term]:
    """The keyword units of one clause: its tokens, except that 2–3 capitalized English words
    separated by single spaces (a name: "Zhang Wei") make one term."""
    out: list[_Term] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        j = i + 1
        if _is_title(t):
            while (
                j < len(toks)
                and j - i < 3
                and _is_title(toks[j])
                and norm[toks[j - 1].start + len(toks[j - 1].surface) : toks[j].start] == " "
            ):
                j += 1
        if j - i >= 2:
            group = toks[i:j]
            text = " ".join(g.text for g in group)
            out.append(_Term(text, " ".join(g.surface for g in group), False, True))
        else:
            s = t.surface
            # A capital inside a Latin word (JWT, PostgreSQL), or on a word that does not
            # start its clause, marks a name or a term.
            marked = not t.han and (any(c.isupper() for c in s[1:]) or (s[:1].isupper() and i > 0))
            out.append(_Term(t.text, s, t.han, marked))
        i = j
    return out


@lru_cache(maxsize=4096)
def _analyze(text: str) -> _Analysis:
    lex = _lex()
    msgs = _parse_messages(text)
    clauses: list[_Clause] = []
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    surface: dict[str, str] = {}
    tier: dict[str, int] = {}
    idf: dict[str, float] = {}
    all_tokens: set[str] = set()
    facts: set[str] = set()  # terms that carry facts: names, numbers, dates, places
    n = 0
    labels: list[str] = []
    for mi, (prefix, body) in enumerate(msgs):
        name = _NAME_LABEL_RE.match(body)
        if name is not None and _NOT_NAMES.intersection(name.group(1).lower().split()):
            name = None
        labels.append(name.group(1) + ": " if name else prefix)
        for sentence in split_sentences(body):
            for clause in split_clauses(sentence):
                toks = tokens(clause)
                terms = _terms(toks, normalize(clause))
                # The name label is the message's first clause (clauses end at ": ").
                is_label = name is not None and (not clauses or clauses[-1].msg != mi)
                clauses.append(
                    _Clause(mi, clause, tuple(t.text for t in toks), tuple(t.text for t in terms),
                            len(_word_spans(clause)) if toks else 0, is_label)
                )
                all_tokens.update(t.text for t in toks)
                for t in terms:
                    w = t.text
                    counts[w] = counts.get(w, 0) + 1
                    if w not in first:
                        first[w] = n
                        surface[w] = t.surface
                        tier[w] = 0 if " " in w else _tier(w, t.han, lex)
                        idf[w] = lex.unknown_idf if " " in w else lex.idf(w, t.han)
                    if t.marked:
                        idf[w] = max(idf[w], lex.idf(w, t.han) * 1.5)
                    if t.marked or " " in w or any(ch.isdigit() for ch in w) or w in lex.facts:
                        facts.add(w)
                    n += 1
    scores = {w: c * idf[w] for w, c in counts.items()}
    candidates = [w for w in counts if w not in ROLE_NAMES]
    candidates.sort(key=lambda w: (tier[w], -scores[w], first[w]))
    keywords = [w for w in candidates if tier[w] == 0][:KEYWORDS_MAX]
    if len(keywords) < KEYWORDS_MIN:
        keywords += [w for w in candidates if tier[w] > 0][: KEYWORDS_MIN - len(keywords)]
    top = max(scores.values(), default=1.0) or 1.0
    kw_rank = {w: i for i, w in enumerate(keywords)}

    def weight(w: str) -> float:
        if w in ROLE_NAMES:
            return 0.0
        r = kw_rank.get(w)
        fact = _FACT_BONUS if w in facts else 0.0
        return scores[w] / top + fact + (0.0 if r is None else 1.0 + (1.5 if r == 0 else 0.0))

    term_weights = {w: weight(w) for c in clauses for w in c.terms}
    weights = tuple(sum(term_weights[w] for w in set(c.terms)) for c in clauses)
    return _Analysis(
        prefixes=tuple(p for p, _ in msgs),
        labels=tuple(labels),
        clauses=tuple(clauses),
        keywords=tuple(keywords),
        display=tuple(surface[w] for w in keywords),
        weights=weights,
        term_weights=term_weights,
        token_set=frozenset(w for w in all_tokens if _significant(w)),
        question=_QUESTION_RE.search(text) is not None,
        has_question_mark=_QUESTION_MARK_RE.search(text) is not None,
    )


# --------------------------------------------------------------------------- compression


def _render_body(texts: Sequence[str]) -> str:
    return "".join(texts).strip().rstrip(_TRAIL)


def _cut_to(s: str, limit: int) -> str:
    """The longest prefix of ``s`` of at most ``limit`` characters that ends at a word boundary
    (jieba's, inside Chinese); a hard cut when no boundary is found."""
    if len(s) <= limit:
        return s
    cut = max((b for b in _word_bounds(s[: limit + 2]) if b <= limit), default=0)
    return s[: cut or limit]


def _keyword_span(clause: str, keyword: str) -> tuple[int, int] | None:
    m = re.search(re.escape(keyword), clause, re.IGNORECASE)
    return (m.start(), m.end()) if m else None


def _window(an: _Analysis, index: int, target: int) -> str:
    """Clause ``index`` cut to at most ``target`` characters: from its first content word, or
    from its best keyword when that would not fit otherwise."""
    clause = an.clauses[index]
    text = clause.text.strip()
    start = 0
    if clause.tokens:
        span = _keyword_span(text, clause.tokens[0])
        if span is not None:
            start = span[0]
    in_clause = set(clause.terms)
    for kw, shown in zip(an.keywords, an.display, strict=True):
        if kw not in in_clause or len(shown) > target:
            continue
        span = _keyword_span(text, shown) or _keyword_span(text, kw)
        if span is not None and (span[1] - start > target or span[0] < start):
            start = span[0]
        break
    out = _cut_to(text[start:], target).strip().rstrip(_TRAIL)
    if len(text) - start > len(out):
        # Cut short: drop dangling English function words ("... writes the").
        words = out.split(" ")
        while len(words) > 1 and words[-1].lower() in ENGLISH_STOP_WORDS:
            words.pop()
        out = " ".join(words).rstrip(_TRAIL)
    if not out:
        out = text[start : start + target].strip() or text[:target].strip()
    return out


def _best_clause(an: _Analysis, target: int) -> int:
    """The best clause that holds a keyword short enough for ``target`` (else the best)."""
    order = sorted(range(len(an.clauses)), key=lambda i: (-an.weights[i], i))
    fitting = {
        kw for kw, shown in zip(an.keywords, an.display, strict=True) if len(shown) <= target
    }
    for i in order:
        if fitting.intersection(an.clauses[i].terms):
            return i
    return order[0]


#: Compression keeps clauses by what their words not yet kept weigh, divided by the characters
#: they add to this power: 1 would favour the shortest fragments ("Alice checked:"), 0 the
#: longest clauses, whose many common words outweighed one rare name (RECALL.md, decision 21).
_LENGTH_EXPONENT = 0.5


def _select(an: _Analysis, target: int) -> tuple[list[int], float] | None:
    """Greedy choice of clauses that fit in ``target`` characters when rendered, each line
    with its speaker's label: each next one the clause whose keyword units not yet kept weigh
    most per √(characters it adds), so a word counts once however many clauses repeat it;
    clauses of stop words only are left out. Returns the clauses and the weight of the units
    they keep; None when no clause fits."""
    clauses = an.clauses
    chosen: dict[int, list[int]] = {}
    line_len: dict[int, int] = {}  # rendered length of each message's line
    lines = 0  # their sum
    kept: set[str] = set()
    total = 0  # rendered length: lines plus the newlines between them
    score = 0.0
    left = [i for i, c in enumerate(clauses) if not c.label]
    while left:
        best: tuple[float, int, int, int, float] | None = None
        for i in left:
            m = clauses[i].msg
            if not clauses[i].words:
                continue
            body = _render_body([clauses[j].text for j in sorted([*chosen.get(m, []), i])])
            new_len = len(an.labels[m]) + len(body) if body else 0
            old_len = line_len.get(m, 0)
            n_lines = len(line_len) - (1 if old_len else 0) + (1 if new_len else 0)
            new_total = lines - old_len + new_len + max(0, n_lines - 1)
            if new_total > target:
                continue
            gain = sum(an.term_weights[w] for w in set(clauses[i].terms) - kept)
            value = gain / max(new_total - total, 1) ** _LENGTH_EXPONENT
            if best is None or value > best[0]:
                best = (value, i, new_total, new_len, gain)
        if best is None:
            break
        _, i, total, new_len, gain = best
        m = clauses[i].msg
        left.remove(i)
        chosen[m] = sorted([*chosen.get(m, []), i])
        lines += new_len - line_len.get(m, 0)
        if new_len:
            line_len[m] = new_len
        else:
            line_len.pop(m, None)
        score += gain
        kept.update(clauses[i].terms)
    if not chosen or total == 0:
        return None
    return sorted(j for js in chosen.values() for j in js), score


def _kept_weight(an: _Analysis, text: str) -> float:
    """The weight of the keyword units of ``an`` that ``text`` (a shortening of it) holds."""
    toks = tokens(text)
    units = {t.text for t in _terms(toks, normalize(text))} | {t.text for t in toks}
    return sum(an.term_weights.get(w, 0.0) for w in units)


def _lines(an: _Analysis, selected: Sequence[int]) -> list[tuple[int, str]]:
    """``(message, text)`` of each line the selected clauses make, labels aside."""
    by_msg: dict[int, list[str]] = {}
    for i in selected:
        c = an.clauses[i]
        if not c.label:
            by_msg.setdefault(c.msg, []).append(c.text)
    return [(m, b) for m, b in ((m, _render_body(by_msg[m])) for m in sorted(by_msg)) if b]


def _render(an: _Analysis, selected: Sequence[int]) -> str:
    """The selected clauses, one line per message, each opening with who said it."""
    return "\n".join(an.labels[m] + body for m, body in _lines(an, selected))


def _labelled_window(an: _Analysis, limit: int) -> str | None:
    """The best clause of two words or more that, cut to fit, still holds two words, with its
    speaker's label, in at most ``limit`` characters; None when none does."""
    order = sorted(
        (i for i, c in enumerate(an.clauses) if not c.label and c.words >= 2),
        key=lambda i: (-an.weights[i], i),
    )
    fitting = [i for i in order if set(an.keywords).intersection(an.clauses[i].terms)]
    for i in fitting + [i for i in order if i not in fitting]:
        label = an.labels[an.clauses[i].msg]
        room = limit - len(label)
        if room < 3:
            continue
        body = _window(an, i, room)
        if len(_word_spans(body)) >= 2 and tokens(body):
            return label + body
    return None


def _pairs(an: _Analysis) -> list[tuple[float, str, str]]:
    """``(weight, gist, words)`` of the shortest gists: two neighbouring words of a clause, one
    of them a content word, with the speaker's label (``gist``) and without (``words``)."""
    out: list[tuple[float, str, str]] = []
    for c in an.clauses:
        if c.label or c.words < 2:
            continue
        text = c.text
        spans = _word_spans(text)

        def w(span: tuple[int, int], text: str = text) -> float:
            return an.term_weights.get(normalize(text[span[0] : span[1]]).lower(), 0.0)

        for a in range(len(spans) - 1):
            opener = text[spans[a][0] : spans[a][1]]
            if opener in CHINESE_STOP_WORDS:
                continue  # "的 UPDATE" does not read
            if w(spans[a]) or w(spans[a + 1]):
                words = text[spans[a][0] : spans[a + 1][1]]
                out.append((w(spans[a]) + w(spans[a + 1]), an.labels[c.msg] + words, words))
    return out


def _compress(an: _Analysis, text: str, target: int) -> str:
    """Whole clauses, or the best clause cut to fit when that keeps more (a small target that
    the clauses holding the names do not fit whole), each line with its speaker's label and
    two words at least, in ``target`` characters and the label's (at most
    ``LENGTH_TOLERANCE`` × ``target``, what a model's answer may reach, SPEC §5.2) — else in
    that most — else two words and the label."""
    if not an.clauses:
        return text.strip()[: max(target, 0)]
    limit = math.floor(LENGTH_TOLERANCE * target)
    pairs = _pairs(an)
    candidates: list[str] = []
    # Who said it is not content: its label may take what the tolerance leaves above the
    # target, so the words kept are what the target alone would keep.
    first = min(limit, target + max(map(len, an.labels), default=0))
    for budget in (first, limit):
        plain = _select(an, budget)
        if plain is not None and plain[0]:
            rendered = _render(an, plain[0])
            if all(len(_word_spans(body)) >= 2 for _, body in _lines(an, plain[0])):
                candidates.append(rendered)
            else:
                plain = None  # a line of one word: not a gist
        window = _labelled_window(an, budget)
        if window is not None:
            candidates.append(window)
        fitting = [p for p in pairs if len(p[1]) <= budget]
        if fitting:
            candidates.append(max(fitting, key=lambda p: (p[0], -len(p[1])))[1])
        if plain is not None or window is not None:
            break  # clauses fit: the pairs of the larger budget are no better
    if candidates:
        return max(candidates, key=lambda c: (_kept_weight(an, c), -len(c)))
    # No gist this short (the manager forgets such a node before asking: shortest_length):
    # the weightiest two words, without the label, cut to fit.
    best = max(pairs, key=lambda p: p[0], default=None)
    if best is None:
        return text.strip()[:limit]
    return _cut_to(best[2], limit).strip() or text.strip()[:limit]


def _phrase(an: _Analysis) -> str:
    """The whole text when short, else its best clause (with neighbours while it is under
    ``_PHRASE_MIN`` characters), cut to ``PHRASE_MAX`` characters."""
    if not an.clauses:
        return ""
    by_msg: dict[int, list[str]] = {}
    for c in an.clauses:
        by_msg.setdefault(c.msg, []).append(c.text)
    out = " ".join("\n".join(filter(None, map(_render_body, by_msg.values()))).split())
    if len(out) > PHRASE_MAX:
        best = _best_clause(an, PHRASE_MAX)
        lo = hi = best
        out = " ".join(_render_body([an.clauses[best].text]).split())
        if len(out) > PHRASE_MAX:
            out = " ".join(_window(an, best, PHRASE_MAX).split())
        while len(out) < _PHRASE_MIN:
            grown = None
            for lo2, hi2 in ((lo, hi + 1), (lo - 1, hi)):
                cl = an.clauses
                if lo2 >= 0 and hi2 < len(cl) and cl[lo2].msg == cl[hi2].msg:
                    texts = [c.text for c in an.clauses[lo2 : hi2 + 1]]
                    cand = " ".join(_render_body(texts).split())
                    if len(cand) <= PHRASE_MAX:
                        grown = (lo2, hi2, cand)
                        break
            if grown is None:
                break
            lo, hi, out = grown
    stripped = out.rstrip(_PHRASE_TRAIL)
    return (stripped or out)[:PHRASE_MAX]


# --------------------------------------------------------------------------- segmentation


#: Marks that join two words into one ("long-term", "Tom's"): no cut on either side of them.
_JOINERS = frozenset("-'’‐‑")
#: Marks inside a number, a time or a date ("6,000", "4:30", "2.5", "12/15"): no cut there.
_NUMBER_JOINERS = frozenset(",.:/")


def _word_bounds(s: str) -> set[int]:
    """Offsets in ``s`` where a cut splits no word (jieba decides inside Han runs); a hyphen or
    apostrophe between two letters or digits is inside its word, and so is a comma, point,
    colon or slash between two digits."""
    joined = {
        i for i in range(1, len(s) - 1)
        if (s[i] in _JOINERS and is_word_char(s[i - 1]) and is_word_char(s[i + 1]))
        or (s[i] in _NUMBER_JOINERS and s[i - 1].isdigit() and s[i + 1].isdigit())
    }
    bounds = {
        i
        for i in range(1, len(s))
        if not (is_word_char(s[i - 1]) and is_word_char(s[i]))
        and not (is_han(s[i - 1]) and is_han(s[i]))
        and i not in joined and i - 1 not in joined
    }
    i = 0
    while i < len(s):
        if is_han(s[i]):
            j = i
            while j < len(s) and is_han(s[j]):
                j += 1
            pos = i
            for word in cut_han(s[i:j]):
                pos += len(word)
                if pos < j:
                    bounds.add(pos)
            i = j
        else:
            i += 1
    return bounds


def _hard_cut(s: str, budget: int) -> Iterator[str]:
    bounds = _word_bounds(s)
    start = 0
    while len(s[start:].strip()) > budget:
        limit = start + budget
        cut = max((b for b in bounds if start < b <= limit), default=limit)
        yield s[start:cut]
        start = cut
    yield s[start:]


def _atoms(body: str, budget: int) -> Iterator[str]:
    """Pieces of ``body`` (lossless) of at most ``budget`` non-blank characters each,
    cut at sentence ends, then clause marks, then spaces, then word boundaries."""
    for sentence in split_sentences(body):
        if len(sentence.strip()) <= budget:
            yield sentence
            continue
        for clause in split_clauses(sentence):
            if len(clause.strip()) <= budget:
                yield clause
                continue
            for word in re.split(r"(?<=\s)(?=\S)", clause):
                if len(word.strip()) <= budget:
                    yield word
                else:
                    yield from _hard_cut(word, budget)


def _pieces(body: str, budget: int) -> list[str]:
    pieces: list[str] = []
    cur = ""
    for atom in _atoms(body, budget):
        if cur and len((cur + atom).strip()) > budget:
            pieces.append(cur)
            cur = atom
        else:
            cur += atom
    pieces.append(cur)
    return [p.strip() for p in pieces if p.strip()]


# --------------------------------------------------------------------------- the model

#: A text of more than two messages (a conversation, not one exchange) merges up to this many
#: times ``merge_chars`` in :func:`~memory_rdf._text.text_units`; so does mostly Chinese text.
CONVERSATION_MERGE_FACTOR = 4


class HeuristicModel:
    """The default small model: offline, deterministic, Chinese and English.

    ``max_segment_chars`` bounds the length of every segment (role labels included): a message
    that fits stays one segment, so what was said in one turn stays findable in one memory
    (measured on LoCoMo: ``benchmarks/RECALL.md``); a longer one is cut into pieces.
    Consecutive short messages that share a word (English words compared by their stems)
    are merged while the segment stays within a length counted in
    :func:`~memory_rdf._text.text_units` (a Han character counts two, as it says about what
    two Latin letters do), so Chinese and English are merged by one rule:

    - one exchange (a text of one or two messages): ``merge_chars`` (100) units, so a short
      question and its short answer stay one memory while two longer turns stay one memory
      each (merged up to 200, English exchanges were compressed sooner and found less often
      by recall: ``benchmarks/RECALL.md``, decision 15); mostly Chinese text as a conversation
      (kept as it was: nothing measured it in Chinese);
    - a conversation (more messages): ``CONVERSATION_MERGE_FACTOR`` times that, 400 units
      (200 Han characters, what Chinese always merged up to), so a session remembered at once
      becomes a few memories in English too, not one per message (decision 20).
    """

    def __init__(self, max_segment_chars: int = 400, merge_chars: int = 100) -> None:
        for name, value in (("max_segment_chars", max_segment_chars),
                            ("merge_chars", merge_chars)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int")
        if max_segment_chars < 20:
            raise ValueError(f"max_segment_chars must be at least 20, got {max_segment_chars}")
        if merge_chars < 0:
            raise ValueError(f"merge_chars must be >= 0, got {merge_chars}")
        self.max_segment_chars = max_segment_chars
        self.merge_chars = merge_chars

    def __repr__(self) -> str:
        return (f"HeuristicModel(max_segment_chars={self.max_segment_chars}, "
                f"merge_chars={self.merge_chars})")

    # -- segment -------------------------------------------------------------------------

    def segment(self, text: str) -> list[str]:
        """Cut chat text (``"{role}: {content}"`` lines) into segments of at most
        ``max_segment_chars`` characters, each line keeping its role label: a message that
        fits whole, a longer one in pieces; consecutive short messages that share a word
        merged while the segment stays within its merge length (:meth:`_merge_cap`)."""
        limit = self.max_segment_chars
        messages = _parse_messages(text)
        conversation = len(messages) > 2
        segments: list[str] = []
        # The open segment, while it holds only whole messages and may take another one.
        open_tokens: set[str] | None = None
        for prefix, body in messages:
            pieces = _pieces(body, limit - len(prefix))
            if not pieces:
                continue
            if len(pieces) == 1:
                line = prefix + pieces[0]
                toks = {stem(t) for t in tokenize(pieces[0]) if _significant(t)}
                merged = segments[-1] + "\n" + line if open_tokens is not None else ""
                if (
                    open_tokens is not None
                    and toks & open_tokens
                    and len(merged) <= limit
                    and text_units(merged) <= self._merge_cap(merged, conversation)
                ):
                    segments[-1] = merged
                    open_tokens |= toks
                else:
                    segments.append(line)
                    open_tokens = toks
            else:
                segments.extend(prefix + p for p in pieces)
                open_tokens = None
        return segments

    def _merge_cap(self, merged: str, conversation: bool) -> int:
        """The most :func:`~memory_rdf._text.text_units` a merged segment may have:
        ``merge_chars`` in one exchange of text that is not mostly Chinese,
        ``CONVERSATION_MERGE_FACTOR`` times that otherwise."""
        if conversation or is_cjk_text(merged):
            return self.merge_chars * CONVERSATION_MERGE_FACTOR
        return self.merge_chars

    # -- process -------------------------------------------------------------------------

    def process(self, text: str, target_length: int | None = None) -> Processed:
        """Content (shortened to at most ``target_length`` characters when longer), a phrase
        of at most 20 characters, and 3–5 keywords."""
        an = _analyze(text)
        keywords = list(an.display)
        if target_length is None or len(text) <= target_length:
            content = text
        elif target_length <= 0:
            content = keywords[0] if keywords else text.strip()[:1]
        else:
            content = _compress(an, text, target_length)
        return Processed(content=content, phrase=_phrase(an), keywords=keywords)

    def shortest_length(self, text: str) -> int:
        """The fewest characters a shortening of ``text`` keeps a gist in: who said it and two
        neighbouring words (the text's own length when it has no two words to keep). The
        manager forgets a node whose target leaves less room than this (SPEC §5.2 step 5)."""
        an = _analyze(text)
        return min((len(g) for _, g, _ in _pairs(an)), default=len(text.strip()))

    def process_batch(self, texts: list[str]) -> list[Processed]:
        """``process`` of each text, in order (same results as the single calls)."""
        return [self.process(t) for t in texts]

    # -- relation ------------------------------------------------------------------------

    def relation(self, node_content: str, focus_content: str) -> str:
        """One of :data:`RELATIONS` when the node's content is mostly Chinese, else the same
        relation in :data:`ENGLISH_RELATIONS` (SPEC §5.4 v3: names in the content's language);
        "" when the two texts share no content word."""
        node = _analyze(node_content)
        focus = _analyze(focus_content)
        if not node.token_set & focus.token_set:
            return ""
        if focus.question and not node.has_question_mark:
            kind = 0
        elif any(set(k.split(" ")) <= node.token_set for k in focus.keywords):
            kind = 1
        else:
            kind = 2
        names = RELATIONS if is_cjk_text(strip_role_prefixes(node_content)) else ENGLISH_RELATIONS
        return names[kind]

    def relation_batch(self, pairs: list[tuple[str, str]]) -> list[str]:
        """``relation(node, focus)`` of each pair, in order (same results as single calls)."""
        return [self.relation(node, focus) for node, focus in pairs]
