"""Shared text utilities: CJK detection, tokenization, index terms, sentence splitting.

Chinese is cut into words with jieba (index terms in its search mode, which adds the words
inside compounds); everything else is tokenized by a regular expression.
jieba is imported and its dictionary loaded lazily, on the first call that needs it, under a
lock and without printing anything: importing this module stays cheap.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import unicodedata
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from memory_rdf._allocator import release_freed_memory

__all__ = [
    "CHINESE_STOP_WORDS",
    "ENGLISH_STOP_WORDS",
    "ENGLISH_WORD",
    "HAN_UNITS",
    "ROLE_NAMES",
    "STOP_WORDS",
    "Token",
    "index_terms",
    "cut_han",
    "cut_han_for_search",
    "is_cjk_text",
    "is_han",
    "is_word_char",
    "jieba_module",
    "normalize",
    "split_clauses",
    "split_sentences",
    "stem",
    "strip_role_prefixes",
    "text_units",
    "tokenize",
    "tokenize_for_index",
    "tokens",
]

# Han ideographs: CJK Unified (+ Extension A, B..F) and compatibility ideographs.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_HAN_RE = re.compile(f"[{HAN}]")
# A "Latin" word character: a letter or digit that is not a Han ideograph.
WORD_CHAR = rf"[^\W_{HAN}]"
_WORD_CHAR_RE = re.compile(WORD_CHAR)
# Han runs go to jieba; other words: letters/digits joined by . - _ ' + (v2.0, 2026-12-15,
# node.js, user_id, don't), optionally ending in ++ or # (c++, c#).
_LATIN_WORD = rf"{WORD_CHAR}+(?:[.\-_'+]{WORD_CHAR}+)*(?:\+\+|#)?"
_SCAN_RE = re.compile(rf"([{HAN}]+)|({_LATIN_WORD})")
_LATIN_WORD_RE = re.compile(_LATIN_WORD)


def word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


ROLE_NAMES = frozenset({"user", "assistant", "system"})
_ROLE_PREFIX_RE = re.compile(r"^(?:user|assistant|system):[ \t]?", re.MULTILINE)

CHINESE_STOP_WORDS = word_set(
    """
    的 地 得 了 着 过 是 在 有 没 没有 不 也 就 都 还 又 再 才 很 太 更 最 已 已经 正在
    我 我们 你 你们 您 他 他们 她 她们 它 它们 咱 咱们 自己 大家 人家 别人
    这 那 这个 那个 这些 那些 这样 那样 这么 那么 这里 那里 这儿 那儿 哪 哪个 哪里 谁 啥
    什么 怎么 怎样 怎么样 为什么 如何 多少 几
    和 与 及 以及 或 或者 跟 同 而 而且 并 并且 但 但是 可是 不过 然而 所以 因为 因此 如果
    要是 虽然 然后 于是 还是 还有 另外 以及 就是 只是 只 也是 都是 不是 是不是
    把 被 给 让 叫 从 对 向 往 到 于 以 为 为了 由 按 按照 关于 比 除了
    要 会 能 能够 可以 可能 应该 得 该 想 愿意
    吧 吗 呢 啊 呀 哦 噢 嗯 嗯嗯 哈 哈哈 啦 嘛 呗 哎 唉 喔 哇 么 呃 的话 而已 罢了
    一 一下 一个 一些 一点 一点儿 一样 一起 一直 一定 些 个 上 下 中 里 内 外 前 后 等 等等 之 其
    其他 其它 其中 好 好的 对 对的 行 嗯好 是的 非常 比较 真的 确实 其实 然后呢 现在
    """
)

ENGLISH_STOP_WORDS = word_set(
    """
    a an the and or but nor so if then than as of to in on at by for with from into onto
    over under up down out off about above below between through during before after again
    is are was were be been being am do does did doing done have has had having
    i me my mine myself we us our ours ourselves you your yours yourself yourselves
    he him his himself she her hers herself it its itself they them their theirs themselves
    this that these those there here what which who whom whose when where why how
    all any both each few more most other some such no not only own same too very just
    can could will would shall should may might must
    don't doesn't didn't isn't aren't wasn't weren't won't wouldn't can't couldn't shouldn't
    i'm i've i'll i'd we're we've we'll we'd you're you've you'll you'd he's she's it's
    they're they've they'll that's there's what's let's
    also yes yeah ok okay oh hi hello hey please thanks thank s t
    """
)

STOP_WORDS = CHINESE_STOP_WORDS | ENGLISH_STOP_WORDS


class Token(NamedTuple):
    """One normalized token: ``text`` lower-cased; ``surface`` as written (NFKC);
    ``han`` for a Chinese word; ``start`` its offset in the normalized text."""

    text: str
    surface: str
    han: bool
    start: int


_lock = threading.Lock()
_jieba: Any = None


class _NoPkgResources:
    """A ``sys.meta_path`` finder that refuses ``pkg_resources`` to one thread only (the one
    importing jieba): jieba 0.42.1 imports it when it can, only to open its dictionary file,
    and falls back to ``open()`` otherwise. Importing it scans every installed distribution:
    ~10 MB of RSS and ~0.2 s a process that nothing else used (issue 38); other threads'
    imports are not touched."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(self, name: str, *args: object) -> None:
        if name == "pkg_resources" and threading.get_ident() == self.thread:
            raise ModuleNotFoundError("not for jieba", name=name)
        return None


def jieba_module() -> Any:
    """The jieba module, imported and initialized on first use (thread-safe, silent)."""
    global _jieba
    if _jieba is None:
        with _lock:
            if _jieba is None:
                with warnings.catch_warnings():
                    # jieba 0.42.1 has invalid escapes and may import pkg_resources.
                    warnings.simplefilter("ignore")
                    refuse = _NoPkgResources()
                    sys.meta_path.insert(0, refuse)
                    try:
                        import jieba
                    finally:
                        sys.meta_path.remove(refuse)

                    jieba.setLogLevel(logging.WARNING)
                    jieba.initialize()
                _jieba = jieba
                # unmarshalling its dictionary (a 9 MB cache file into a dict of ~500,000
                # words, grown by doubling) left ~18 MB of freed buffers and tables resident
                # in the arena of a thread that runs recall (issue 38)
                release_freed_memory()
    return _jieba


#: Longest run of Han characters given to jieba at once; a longer one is cut in pieces this
#: long. jieba's HMM (Viterbi) is quadratic in its input: 100,000 repeated characters took
#: 14 s of the one scheduler thread, and each such run stayed in the caches below as a key.
#: A real sentence's run between punctuation is far shorter, so its words do not change.
HAN_RUN_MAX = 500


def _pieces(run: str) -> list[str]:
    return [run[i:i + HAN_RUN_MAX] for i in range(0, len(run), HAN_RUN_MAX)] or [run]


def cut_han(run: str) -> tuple[str, ...]:
    """jieba's words for a run of Han characters (cached per piece of :data:`HAN_RUN_MAX`)."""
    if len(run) <= HAN_RUN_MAX:
        return _cut(run)
    return tuple(word for piece in _pieces(run) for word in _cut(piece))


def cut_han_for_search(run: str) -> tuple[str, ...]:
    """jieba's search-mode words for a run of Han characters (cached per piece): the words of
    :func:`cut_han` plus the dictionary words of two and three characters inside each longer
    one ("车牌号" gives "车牌", "牌号", "车牌号")."""
    if len(run) <= HAN_RUN_MAX:
        return _cut_for_search(run)
    return tuple(word for piece in _pieces(run) for word in _cut_for_search(piece))


@lru_cache(maxsize=16384)
def _cut(run: str) -> tuple[str, ...]:
    return tuple(jieba_module().lcut(run))


@lru_cache(maxsize=16384)
def _cut_for_search(run: str) -> tuple[str, ...]:
    return tuple(jieba_module().lcut_for_search(run))


def normalize(text: str) -> str:
    """NFKC (full-width letters become ASCII) with curly apostrophes made straight."""
    return unicodedata.normalize("NFKC", text).replace("\u2019", "'")


def _latin(surface: str) -> tuple[str, str] | None:
    """``(lower-cased, surface)`` of a non-Han word, possessive "'s" cut; None for a stop word."""
    low = surface.lower()
    if low.endswith("'s") and len(low) > 2:
        low = low[:-2]
        surface = surface[:-2]
    if low in ENGLISH_STOP_WORDS:
        return None
    return low, surface


def tokens(text: str, *, search: bool = False) -> list[Token]:
    """Normalized tokens with their surface forms; stop words and punctuation dropped.

    ``search=True`` cuts Chinese in jieba's search mode (:func:`cut_han_for_search`): its
    words overlap, so each carries the position of its run of Han characters.
    """
    norm = normalize(text)
    out: list[Token] = []
    for m in _SCAN_RE.finditer(norm):
        han_run = m.group(1)
        if han_run is not None:
            pos = m.start()
            for word in (cut_han_for_search if search else cut_han)(han_run):
                if word not in CHINESE_STOP_WORDS:
                    out.append(Token(word, word, True, pos))
                if not search:
                    pos += len(word)
            continue
        latin = _latin(m.group(2))
        if latin is not None:
            out.append(Token(latin[0], latin[1], False, m.start()))
    return out


def tokenize(text: str) -> list[str]:
    """Normalized tokens of ``text``, in order (duplicates kept).

    Lower-cased; Chinese cut into words by jieba; English words, numbers, versions and
    dates kept whole ("v2.0", "2026-12-15", "c++"); punctuation, whitespace and stop
    words dropped. The keyword entry's query terms (SPEC §5.5) are these.
    """
    return [t.text for t in tokens(text)]


def tokenize_for_index(text: str) -> list[str]:
    """:func:`tokenize` with Chinese cut in jieba's search mode (:func:`cut_han_for_search`).

    The index terms of a node (``memory:term``, SPEC §5.5) are these, while a query is cut by
    :func:`tokenize`: every word jieba finds in the node's text is a term, and so is every
    dictionary word of two or three characters inside a longer one, so a query word that is
    part of a compound ("车牌" in "车牌号") still finds the node. Stop words are dropped;
    everything that is not Chinese is exactly as in :func:`tokenize`. In order of appearance
    (a compound's parts before the compound), duplicates kept.
    """
    return [t.text for t in tokens(text, search=True)]


#: A lower-cased English word (ASCII letters, an inner apostrophe): what :func:`stem` stems.
ENGLISH_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_STEMMER_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _english_stemmer() -> Any:
    import snowballstemmer  # type: ignore[import-untyped]

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=65_536)
def stem(term: str) -> str:
    """A normalized token's word stem: English words (ASCII letters) through the Snowball
    English stemmer ("painted", "painting", "paints" → "paint"); anything else — Chinese
    words, numbers, "gpt-4" — as it is."""
    if ENGLISH_WORD.fullmatch(term):
        with _STEMMER_LOCK:  # a Snowball stemmer keeps its word in itself while it works
            return str(_english_stemmer().stemWord(term))
    return term


def strip_role_prefixes(text: str) -> str:
    """``text`` without the ``"user: "``-style role labels that start its lines."""
    return _ROLE_PREFIX_RE.sub("", text)


def index_terms(content: str, keywords: Iterable[str]) -> list[str]:
    """A node's ``memory:term`` values: the sorted, de-duplicated :func:`tokenize_for_index`
    tokens of ``keywords`` and ``content`` (role labels ignored)."""
    terms = set(tokenize_for_index(strip_role_prefixes(content)))
    for k in keywords:
        terms.update(tokenize_for_index(k))
    return sorted(terms)


def is_cjk_text(text: str) -> bool:
    """True when ``text`` is mostly Chinese: at least as many Han characters as other words."""
    han = len(_HAN_RE.findall(text))
    if han == 0:
        return False
    # the words _SCAN_RE finds beside Han runs (neither kind of match holds the other's
    # characters, so scanning for the words alone finds the same ones; ~2x faster)
    return han >= len(_LATIN_WORD_RE.findall(text))


#: What one Han character counts in :func:`text_units`: about what two Latin letters say (the
#: bundled Chinese and English demo conversations, which tell one story, are 3,501 and 6,508
#: characters long; 5,659 and 6,508 units).
HAN_UNITS = 2


def text_units(text: str) -> int:
    """The length of ``text`` in Latin-letter units: a Han character counts :data:`HAN_UNITS`,
    any other character one. A length so measured means about as much in Chinese as in
    English, where a count of characters makes the same content about twice as long in
    English.

    >>> text_units("JWT 过期"), text_units("JWT expiry")
    (8, 10)
    """
    return len(text) + (HAN_UNITS - 1) * len(_HAN_RE.findall(text))


_CLOSERS = "\"'”’」』）)\\]】》"
# A sentence ends at full-width 。！？；… (anywhere), at ASCII . ! ? ; when followed by
# whitespace, the end, a closer or a Han character (so not inside "v2.0" or a URL), or at a
# newline; closing quotes/brackets and the following whitespace stay with the sentence.
_SENT_END_RE = re.compile(
    rf"(?:[。！？；…]+[.!?;。！？；…]*|[.!?;]+(?=[\s{_CLOSERS}{HAN}]|$)|\n)[{_CLOSERS}]*\s*"
)


def split_sentences(text: str) -> list[str]:
    """Split ``text`` after each sentence end; ``"".join(result) == text``.

    The punctuation and the whitespace after it stay with their sentence; a piece that is
    only whitespace is joined to its neighbour, so only all-blank input gives a blank piece.
    """
    pieces: list[str] = []
    last = 0
    for m in _SENT_END_RE.finditer(text):
        end = m.end()
        if end > last:
            pieces.append(text[last:end])
            last = end
    if last < len(text):
        pieces.append(text[last:])
    return _merge_blank(pieces)


def _merge_blank(pieces: list[str]) -> list[str]:
    out: list[str] = []
    pending = ""
    for p in pieces:
        if not p.strip():
            if out:
                out[-1] += p
            else:
                pending += p
            continue
        out.append(pending + p)
        pending = ""
    if pending:
        out.append(pending)
    return out


_CLAUSE_END_RE = re.compile(r"(?:[，、：]+|[,:](?=\s))\s*")


def split_clauses(sentence: str) -> list[str]:
    """Split a sentence after clause marks (，、： and ", " / ": "); lossless like
    :func:`split_sentences`."""
    pieces: list[str] = []
    last = 0
    for m in _CLAUSE_END_RE.finditer(sentence):
        end = m.end()
        if end > last:
            pieces.append(sentence[last:end])
            last = end
    if last < len(sentence):
        pieces.append(sentence[last:])
    return _merge_blank(pieces)


def is_word_char(ch: str) -> bool:
    """A letter or digit that is not Han (cutting between two of these splits a word)."""
    return _WORD_CHAR_RE.match(ch) is not None


def is_han(ch: str) -> bool:
    return _HAN_RE.match(ch) is not None


# ---------------------------------------------------------------------------------------------
# Language of what the agent reads (SPEC §3 ``language``, §5.4 v3)
# ---------------------------------------------------------------------------------------------

#: ``Config.language`` values: "auto" = each entry's content decides; "zh" / "en" force one.
LANGUAGES = ("auto", "zh", "en")

#: The display forms of the built-in relation names (SPEC §5.4 v3), Chinese → English: the
#: one table of them. Stored names stay as the model gave them (the chain links of §5.1 are
#: always "上文" / "下文"); recall shows each in the entry's language, and ``relations=``
#: accepts either form (:func:`relation_forms`).
RELATION_NAMES: dict[str, str] = {
    "上文": "previous",
    "下文": "next",
    "回应": "answers",
    "提到": "mentions",
    "涉及": "relates to",
}
_RELATION_CHINESE = {en: zh for zh, en in RELATION_NAMES.items()}


def writes_chinese(content: str, language: str = "auto") -> bool:
    """Whether an entry about ``content`` is written in Chinese: ``language`` "zh" / "en"
    force it; "auto" = the content is mostly Han text (:func:`is_cjk_text`).

    >>> writes_chinese("用户喜欢乌龙茶"), writes_chinese("The user likes oolong tea")
    (True, False)
    >>> writes_chinese("The user likes oolong tea", "zh")
    True
    """
    if language == "zh":
        return True
    if language == "en":
        return False
    return is_cjk_text(content)


def relation_display(name: str, chinese: bool) -> str:
    """A relation name as shown in an entry of that language: a built-in name in either form
    becomes the form of the language (:data:`RELATION_NAMES`); any other name is as stored.

    >>> relation_display("提到", chinese=False), relation_display("answers", chinese=True)
    ('mentions', '回应')
    """
    if chinese:
        return _RELATION_CHINESE.get(name, name)
    return RELATION_NAMES.get(name, name)


def relation_forms(names: Iterable[str]) -> list[str]:
    """The names with the other form of every built-in one added (SPEC §5.4 v3:
    ``relations=["next"]`` follows the stored "下文" links, and the other way round).

    >>> relation_forms(["next", "custom"])
    ['next', '下文', 'custom']
    """
    out: dict[str, None] = {}
    for name in names:
        out[name] = None
        other = RELATION_NAMES.get(name) or _RELATION_CHINESE.get(name)
        if other is not None:
            out[other] = None
    return list(out)


# ---------------------------------------------------------------------------------------------
# Matching recall keywords (SPEC §5.4 v3 rule 4)
# ---------------------------------------------------------------------------------------------

_JOINERS_RE = re.compile(r"[.\-_'+#]+")
#: Stems (Snowball English) some of whose words do not contain the stem's root
#: (:func:`_root`): the stemmer's exception list ("dying" → "die", "skies" → "sky").
_STEM_EXTRA_NEEDLES = {"die": ("dying",), "lie": ("lying",), "tie": ("tying",),
                       "sky": ("skies",)}


def _word_stems(word: str) -> list[str]:
    """The stems a Latin token stands for: its own, and those of its parts when it is joined
    ("gpt-4" → "gpt-4", "gpt", "4"; "node.js" → "node.js", "node", "js")."""
    if word.endswith("'s") and len(word) > 2:
        word = word[:-2]
    out = [stem(word)]
    if _JOINERS_RE.search(word):
        out.extend(stem(p) for p in _JOINERS_RE.split(word) if p)
    return out


@lru_cache(maxsize=16384)
def word_stems(text: str) -> frozenset[str]:
    """The stems of every Latin-script word of ``text`` (stop words included: a recall made
    only of stop words matches by them), lower-cased and normalized, joined words also by
    their parts (:func:`_word_stems`). Han text adds nothing (it matches as substrings).
    Cached by text: the same nodes are matched again by later recalls."""
    out: set[str] = set()
    for m in _SCAN_RE.finditer(normalize(text).lower()):
        word = m.group(2)
        if word is not None:
            out.update(_word_stems(word))
    return frozenset(out)


def _root(word_stem: str) -> tuple[str, ...]:
    """Substrings one of which every word with this stem contains, lower-cased: what a
    store's ``CONTAINS`` filter can look for before the words are compared. The Snowball
    stem is its words' beginning except where the stemmer rewrote an ending ("happy" →
    "happi", "hoping" → "hope", "possibility" → "possibl"): those letters are cut."""
    if not ENGLISH_WORD.fullmatch(word_stem):
        return (word_stem,)
    root = word_stem
    if len(root) > 2 and root[-1] in "ie":
        root = root[:-1]
    if len(root) > 2 and root.endswith("bl"):
        root = root[:-1]
    return (root, *_STEM_EXTRA_NEEDLES.get(word_stem, ()))


@dataclass(frozen=True)
class KeywordRule:
    """How one recall keyword matches a node's text (SPEC §5.4 v3 rule 4).

    ``han``: the keyword holds Han script and matches as a case-insensitive substring
    (``text``); otherwise every one of its words (``stems``: stop words dropped unless it
    has no other word) must be a word of the text by stem (:func:`word_stems`); a keyword
    with no word at all (punctuation) matches as a substring. ``needles``: lower-cased
    substrings one of which every matching text holds, folded (:func:`fold`): a store-side
    prefilter of the texts that fold alike (:func:`fold_class`)."""

    text: str
    han: bool
    stems: frozenset[str]
    needles: tuple[str, ...]

    def matches(self, text: str, folded: str | None = None) -> bool:
        """Whether ``text`` (a node's content or one of its keywords, lower-cased) matches:
        compared folded (:func:`fold`) as the keyword is, so "ＳＱＬ" matches "SQL" either way
        round. ``folded``: ``fold(text)``, when the caller has it (a text tested by several
        rules is folded once)."""
        if self.han or not self.stems:
            return self.text in (fold(text) if folded is None else folded)
        return self.stems <= word_stems(text)


def fold(low: str) -> str:
    """A lower-cased text (a store's ``LCASE``, :meth:`str.lower`) as keywords are compared
    with it: through :func:`normalize` (NFKC: "ＳＱＬ" → "SQL") and lower-cased again. Every
    :attr:`KeywordRule.needles` of a text that matches is a substring of this form; most
    texts already are in it (:func:`fold_class`).

    >>> fold("ｐｏｓｔｇｒｅsql"), fold("don\u2019t")
    ('postgresql', "don't")
    """
    return normalize(low).lower()


#: The ASCII punctuation and the space: a needle holding one of them may be written otherwise
#: in a text ("：", "’", a no-break space; :func:`fold_class`).
MARKS = frozenset(chr(c) for c in range(0x20, 0x7F) if not chr(c).isalnum())


class _MarkFolds(dict[int, int]):
    """``str.translate``'s table of the characters that fold (:func:`fold`) to one of the
    :data:`MARKS` ("：" → ":", "’" → "'", U+3000 → " "); every other character to itself.
    Filled as characters are met."""

    def __missing__(self, code: int) -> int:
        folded = fold(chr(code))
        self[code] = ord(folded) if code > 0x7F and folded in MARKS else code
        return self[code]


_MARK_FOLDS = _MarkFolds()
#: :func:`fold_class`'s answers.
FOLDS_ALIKE, WIDE_MARKS, UNFOLDED = 0, 1, 2


def fold_class(low: str) -> int:
    """How a lower-cased text differs from its :func:`fold`, which tells whether a store's
    ``CONTAINS`` on it finds every needle the matching would: :data:`FOLDS_ALIKE` (it is its
    own fold: it does); :data:`WIDE_MARKS` (only characters that fold to one of the
    :data:`MARKS` differ, one for one — a Chinese text's "：", "，", a curly apostrophe, a
    no-break space: it does for a needle without :data:`MARKS`); :data:`UNFOLDED`
    (full-width letters, a ligature, "…": only a test on its fold, in Python, tells).

    >>> fold_class("kafka"), fold_class("用户：我们用 kafka"), fold_class("don\u2019t")
    (0, 1, 1)
    >>> fold_class("ｋａｆｋａ"), fold_class("\ufb01nance"), fold_class("wait\u2026")
    (2, 2, 2)
    """
    if low.isascii():
        return FOLDS_ALIKE
    folded = fold(low)
    if folded == low:
        return FOLDS_ALIKE
    return WIDE_MARKS if folded == low.translate(_MARK_FOLDS) else UNFOLDED


def has_marks(needles: Iterable[str]) -> bool:
    """Whether one of the needles holds one of the :data:`MARKS`."""
    return any(not MARKS.isdisjoint(n) for n in needles)


#: ASCII "!" … "~" → their full-width forms (U+FF01 … U+FF5E), which NFKC maps back.
_FULL_WIDTH = str.maketrans({chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)})


def with_full_width(needles: Iterable[str]) -> list[str]:
    """``needles`` and their full-width forms, each once: what a store's ``CONTAINS`` looks
    for when nothing tells which texts do not fold alike (:func:`fold_class`; an endpoint
    store; an embedded one whose term index is not built): a text written in full-width
    letters ("ＳＱＬ") holds only the full-width needle. A text mixing both widths inside one
    needle ("ＰｏｓｔｇｒｅSQL"), or holding other compatibility characters (ligatures,
    circled digits), is then not found: the term index knows those texts
    (:attr:`~memory_rdf._oxigraph.term_index.TermIndex.unfolded`), and a recall that has it
    reads them whole."""
    return list(dict.fromkeys(f for n in needles for f in (n, n.translate(_FULL_WIDTH))))


def is_stop_keyword(keyword: str) -> bool:
    """A keyword that is only stop words (or punctuation) of its language: "in", "we",
    "的", "我们"."""
    return not tokenize(keyword)


def significant_keywords(keywords: Iterable[str]) -> list[str]:
    """The keywords a recall or listing matches by (SPEC §5.4 v3 rule 4): blank ones and stop
    words left out, unless every keyword is one (then all the non-blank ones).

    >>> significant_keywords(["Where", "are", "we", "staying", "in", "Kyoto"])
    ['staying', 'Kyoto']
    >>> significant_keywords(["in", "we"])
    ['in', 'we']
    """
    given = [k for k in keywords if k.strip()]
    kept = [k for k in given if not is_stop_keyword(k)]
    return kept or given


@lru_cache(maxsize=4096)
def keyword_rule(keyword: str) -> KeywordRule:
    """The :class:`KeywordRule` of one keyword (cached)."""
    low = normalize(keyword).lower().strip()
    if _HAN_RE.search(low):
        return KeywordRule(low, True, frozenset(), (low,))
    words = [m.group(2) for m in _SCAN_RE.finditer(low) if m.group(2) is not None]
    content = [w for w in words if _latin(w) is not None] or words
    stems: set[str] = set()
    needles: tuple[str, ...] = (low,)
    for word in content:
        own = stem(word[:-2] if word.endswith("'s") and len(word) > 2 else word)
        stems.add(own)
        roots = _root(own)
        if len(roots[0]) >= len(needles[0]) or needles == (low,):
            needles = roots
    if not stems:
        return KeywordRule(low, False, frozenset(), (low,))
    return KeywordRule(low, False, frozenset(stems), needles)


def keyword_rules(keywords: Iterable[str]) -> list[KeywordRule]:
    return [keyword_rule(k) for k in keywords]
