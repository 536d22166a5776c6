"""Recall quality on long real conversations: does a budgeted recall hold the evidence?

Two data sets, one question: when an agent recalls with the words of a question, how much of
the evidence is in the first 2,000 (and 4,000) characters it gets back (SPEC §5.4 v2)?

* **LoCoMo** ("Evaluating Very Long-Term Conversational Memory of LLM Agents", Maharana et al.,
  ACL 2024), the development split: 5 conversations of ~30 sessions, 3,336 turns, 1,043
  questions, each with the ``dia_id`` of the turns that hold its answer. The data is not part
  of this project: the script reads it from ``../shared/data/locomo-dev/`` or ``--data PATH``
  (see ``DATA_HELP`` for where to get it).
* The bilingual conversation of ``keyword_eval.py`` (20 planted facts, Chinese and English):
  a fact counts as found when its answer string is in the context.

Each LoCoMo conversation is remembered as an agent would: one exchange (two consecutive turns,
``speaker_a`` as "user", ``speaker_b`` as "assistant", the content prefixed with the speaker's
name and followed by a shared image's caption) per ``remember``, through the built-in
``HeuristicModel`` and ``Config()``'s defaults, with the compression ``Config()`` runs — one
slice per processed remember (``--slices``; run explicitly, so the store does not depend on
the machine's speed). Built stores are cached under ``benchmarks/.work/`` (keyed by the data,
the options and the library's build-time source), so reruns only recall.

Every question is asked with its content words (the library's query tokenizer: lower-cased,
stop words dropped) as keywords, for every entry mode (focus / keywords / both) × depth (2, 4),
with ``max_chars=4000``; the 2,000-character context is the same ranked list cut by the same
rule (entries in order while the joined text fits, the first whole). An evidence turn is
**found** when the context holds at least 60% of its content words. Baselines, same keywords,
same budget, same cut: BM25 over the raw turns (``keyword_eval.BM25``: the network's
tokenizer, k1 = 1.2, b = 0.75), and BM25 with each hit's previous and next turn around it.

Also reported: how much evidence the store can still show at all — the share of evidence
turns that one segment of the model's segmentation holds (≥ 60% of the turn's content
words), and that one stored node holds after compression.

    python benchmarks/recall_quality.py                         # everything (long: see RECALL.md)
    python benchmarks/recall_quality.py --conversations 41 --questions 60   # a quick look
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.keyword_eval import BM25, FACTS, conversation  # noqa: E402
from memory_rdf import Config, HeuristicModel, MemoryManager  # noqa: E402
from memory_rdf._text import stem, tokenize  # noqa: E402

SEP = "\n---\n"
DATA_DEFAULT = REPO.parent / "shared" / "data" / "locomo-dev"
WORK_DEFAULT = REPO / "benchmarks" / ".work"
DATA_HELP = """\
LoCoMo data not found at {path}.
Get it from https://github.com/snap-research/locomo (commit e76cdff): data/locomo10.zip,
folder data/multimodal_dialog/locomo10_v2/ (files 41.json … 50.json; the development split is
41, 42, 43, 44, 47). It is released for research use (CC BY-NC 4.0): do not copy it into this
project; pass its folder with --data PATH."""
BUDGETS = (2000, 4000)
FOUND_SHARE = 0.6
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
MODES = ("focus", "keywords", "both")
# With --embedder: the raw turns ranked by the question's embedding, and fused with BM25.
EMBEDDING_METHODS = ["embedding", "BM25 + embedding"]
# With --embedder: the library with an embedder (SPEC §5.7), the question as ``query=``.
SEMANTIC_MODES = ("semantic", "both+semantic")
SEMANTIC_ENTRY = {"semantic": "semantic", "both+semantic": "both"}
DEPTHS = (2, 4)
# The library files that decide what a build stores (segments, texts, links, compression):
# editing one of them invalidates the cached stores; editing recall does not.
BUILD_SOURCES = ("small_model/*.py", "_text.py", "_remember.py", "_compression.py",
                 "_config.py", "_links.py", "_focus.py", "_types.py")


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str  # what was said, with a shared image's caption

    @property
    def line(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]  # dia_ids


@dataclass
class Conversation:
    name: str
    speakers: tuple[str, str]
    sessions: list[list[Turn]]
    questions: list[Question]
    digest: str

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s]


def load(path: Path) -> Conversation:
    raw = path.read_bytes()
    data = json.loads(raw)
    sessions: list[list[Turn]] = []
    n = 1
    while f"session_{n}" in data:
        turns = []
        for t in data[f"session_{n}"]:
            text = t["text"]
            if t.get("blip_caption"):
                text += f" [shares a photo: {t['blip_caption']}]"
            turns.append(Turn(t["dia_id"], t["speaker"], text))
        sessions.append(turns)
        n += 1
    known = {t.dia_id for s in sessions for t in s}
    questions = []
    for q in data["qa"]:
        evidence = tuple(dict.fromkeys(e for e in q.get("evidence", []) if e in known))
        if evidence:
            questions.append(Question(q["question"], int(q["category"]), evidence))
    return Conversation(path.stem, (data["speaker_a"], data["speaker_b"]), sessions, questions,
                        hashlib.sha256(raw).hexdigest()[:16])


def content_words(text: str) -> set[str]:
    return set(tokenize(text))


def stems(words: set[str]) -> set[str]:
    return {stem(w) for w in words}


def evidence_group(question: str, turn: str) -> str:
    """"paraphrase" when the evidence turn's text shares no stemmed content word with the
    question (a lexical entry cannot find it by the question's words: issue 37's split),
    else "lexical". The speaker's name in front of a turn is not part of its text."""
    return "lexical" if stems(content_words(question)) & stems(content_words(turn)) else (
        "paraphrase")


def holds(context_words: set[str], evidence_words: set[str]) -> bool:
    """An evidence turn is found when the context holds ≥ 60% of its content words."""
    if not evidence_words:
        return True
    return len(evidence_words & context_words) >= FOUND_SHARE * len(evidence_words)


def cut(entries: Sequence[str], budget: int) -> list[str]:
    """Entries in order while the joined text stays within ``budget`` (the first always)."""
    out: list[str] = []
    used = 0
    for e in entries:
        cost = len(e) + (len(SEP) if out else 0)
        if out and used + cost > budget:
            break
        out.append(e)
        used += cost
    return out


# --------------------------------------------------------------------------- building


def build_key(conv: Conversation, args: argparse.Namespace) -> str:
    """Cache key of a built store: the data, the build options and the library's source that
    decides what is stored (``BUILD_SOURCES``)."""
    h = hashlib.sha256()
    h.update(f"{conv.digest} slices={args.slices} v1".encode())
    for pattern in BUILD_SOURCES:
        for f in sorted((REPO / "memory_rdf").glob(pattern)):
            h.update(f.relative_to(REPO).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def exchanges(conv: Conversation) -> list[tuple[int, list[Turn]]]:
    """(session index, turns) of each remember: two consecutive turns of one session."""
    out = []
    for si, session in enumerate(conv.sessions):
        for i in range(0, len(session), 2):
            out.append((si, session[i : i + 2]))
    return out


def messages(conv: Conversation, turns: Sequence[Turn]) -> list[dict[str, str]]:
    return [{"role": "user" if t.speaker == conv.speakers[0] else "assistant",
             "content": t.line} for t in turns]


def build(conv: Conversation, args: argparse.Namespace) -> Path:
    """The conversation's store, built (or found in the cache)."""
    key = build_key(conv, args)
    home = args.work / f"locomo-{conv.name}-{key}"
    if (home / "built.json").exists() and not args.rebuild:
        return home
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    start = time.perf_counter()
    plan = exchanges(conv)
    with MemoryManager("locomo", data_dir=home, config=Config(auto_compress=False)) as mem:
        last = -1
        for n, (si, turns) in enumerate(plan, 1):
            mem.remember(messages(conv, turns))
            for _ in range(args.slices):
                mem.run_compression_slice()
            if si != last or n == len(plan):
                last = si
                print(f"\r  building {conv.name}: session {si + 1}/{len(conv.sessions)}, "
                      f"remember {n}/{len(plan)}, {time.perf_counter() - start:.0f} s",
                      end="", file=sys.stderr, flush=True)
        mem.wait_idle()
        stats = mem.stats()
    print(file=sys.stderr)
    info = {"nodes": stats["nodes"], "links": stats["links"],
            "dangling_links": stats["dangling_links"], "remembers": len(plan),
            "seconds": round(time.perf_counter() - start, 1)}
    (home / "built.json").write_text(json.dumps(info))
    return home


# --------------------------------------------------------------------------- evaluation


@dataclass
class Tally:
    """Evidence found per budget and category, characters and latency of one method."""

    found: dict[tuple[int, int], list[int]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0]))  # (budget, category) → [hit, all]
    # (budget, group) → [hit, all]; group "lexical" or "paraphrase" (see ``evidence_group``)
    groups: dict[tuple[int, str], list[int]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0]))
    chars: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    entries: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    ms: list[float] = field(default_factory=list)
    # with an embedder: each recall's time with its query's embedding (``ms`` is without)
    ms_with_query: list[float] = field(default_factory=list)

    def add(self, category: int, entries: list[str], evidence: list[set[str]], ms: float,
            groups: Sequence[str] = ()) -> None:
        self.ms.append(ms)
        for budget in BUDGETS:
            context = cut(entries, budget)
            text = SEP.join(context)
            words = content_words(text)
            self.chars[budget].append(len(text))
            self.entries[budget].append(len(context))
            for i, ev in enumerate(evidence):
                found = holds(words, ev)
                cell = self.found[(budget, category)]
                cell[0] += found
                cell[1] += 1
                if i < len(groups):
                    group = self.groups[(budget, groups[i])]
                    group[0] += found
                    group[1] += 1

    def add_answer(self, category: int, entries: list[str], answer: str, ms: float) -> None:
        """keyword_eval's rule: found when the answer string is in the context."""
        self.ms.append(ms)
        for budget in BUDGETS:
            context = cut(entries, budget)
            text = SEP.join(context)
            self.chars[budget].append(len(text))
            self.entries[budget].append(len(context))
            cell = self.found[(budget, category)]
            cell[0] += answer in text
            cell[1] += 1

    def group_share(self, budget: int, group: str) -> tuple[int, int]:
        hit, total = self.groups.get((budget, group), (0, 0))
        return hit, total

    def share(self, budget: int, category: int | None = None) -> tuple[int, int]:
        hit = total = 0
        for (b, c), (h, n) in self.found.items():
            if b == budget and (category is None or c == category):
                hit, total = hit + h, total + n
        return hit, total


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pct(cell: tuple[int, int]) -> str:
    hit, total = cell
    return f"{100 * hit / total:5.1f}" if total else "    -"


def bm25_entries(bm25: BM25, lines: list[str], keywords: Sequence[str],
                 neighbours: bool) -> list[str]:
    ids = bm25.top_ids(tuple(keywords), len(lines))
    if neighbours:
        ids = list(dict.fromkeys(j for i in ids for j in (i - 1, i, i + 1)
                                 if 0 <= j < len(lines)))
    return [lines[i] for i in ids[:200]]


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, (time.perf_counter() - t0) * 1000


def store_diagnostics(conv: Conversation, mem: MemoryManager, wanted: set[str]) -> dict[str, int]:
    """How many evidence turns one segment holds (segmentation) and one stored node holds
    (after compression), of ``wanted`` (dia_ids)."""
    model = HeuristicModel()
    evidence = {t.dia_id: content_words(t.text) for t in conv.turns if t.dia_id in wanted}
    segments: list[set[str]] = []
    for _, turns in exchanges(conv):
        if any(t.dia_id in wanted for t in turns):
            text = "\n".join(f"{m['role']}: {m['content']}" for m in messages(conv, turns))
            segments += [content_words(s) for s in model.segment(text)]
    rows = mem.sparql("SELECT ?c WHERE { ?n memory:content ?c }")
    nodes = [content_words(str(r["c"])) for r in rows]  # type: ignore[index]
    by_word: dict[str, list[int]] = defaultdict(list)
    for i, words in enumerate(nodes):
        for w in words:
            by_word[w].append(i)

    def in_nodes(ev: set[str]) -> bool:
        candidates = {i for w in ev for i in by_word.get(w, ())}
        return any(holds(nodes[i], ev) for i in candidates)

    return {
        "evidence": len(evidence),
        "one_segment": sum(any(holds(s, ev) for s in segments) for ev in evidence.values()),
        "one_node": sum(in_nodes(ev) for ev in evidence.values()),
    }


# --------------------------------------------------------------------------- embeddings


class Embeddings:
    """The vectors of texts from an OpenAI-compatible embeddings server (``--embedder``), for
    the raw-turn baselines: unit vectors, as a numpy array."""

    def __init__(self, base_url: str, model: str) -> None:
        import httpx

        self.base_url, self.model = base_url.rstrip("/"), model
        self._client = httpx.Client(timeout=300)

    def __call__(self, texts: Sequence[str]) -> Any:
        import numpy as np

        out = []
        for start in range(0, len(texts), 64):
            part = [t if t.strip() else " " for t in texts[start : start + 64]]
            reply = self._client.post(f"{self.base_url}/embeddings",
                                      json={"model": self.model, "input": part})
            reply.raise_for_status()
            data = sorted(reply.json()["data"], key=lambda d: d["index"])
            out += [d["embedding"] for d in data]
        vectors = np.array(out, dtype=np.float32).reshape(len(texts), -1)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def close(self) -> None:
        self._client.close()


@dataclass(frozen=True)
class Service:
    """An OpenAI-compatible embeddings server: ``base_url`` (ending in ``/v1``) for the
    texts of the stores and the baselines, ``query_url`` for the recalls' queries (for
    ``minilm`` a second server without the vector cache, so a query's time is the model's)."""

    base_url: str
    query_url: str
    model: str

    @property
    def pair(self) -> tuple[str, str]:
        return self.base_url, self.model


@contextmanager
def embedding_service(args: argparse.Namespace) -> Iterator[Service | None]:
    """The server of ``--embedder``: ``minilm`` starts the bundled one
    (``benchmarks/embedding_server.py``) in this process, its vectors cached in
    ``WORK/embeddings``; ``BASE_URL/MODEL`` names a running OpenAI-compatible server (the
    model after the last ``/``, or ``--embedder-model``). None without ``--embedder``."""
    spec = args.embedder
    if not spec:
        yield None
        return
    if spec == "minilm":
        from benchmarks.embedding_server import EmbeddingServer

        with EmbeddingServer(cache_dir=args.work / "embeddings") as server, \
                EmbeddingServer() as uncached:
            yield Service(server.base_url, uncached.base_url, server.model)
            print(f"embedding server: {server.requests + uncached.requests} requests, "
                  f"{server.texts_embedded + uncached.texts_embedded} texts through the model "
                  f"({server.model_seconds + uncached.model_seconds:.0f} s)", file=sys.stderr)
        return
    if args.embedder_model:
        yield Service(spec, spec, args.embedder_model)
        return
    base_url, _, model = spec.rstrip("/").rpartition("/")
    if not base_url.startswith(("http://", "https://")) or not model:
        sys.exit(f"--embedder {spec!r}: expected 'minilm' or BASE_URL/MODEL "
                 "(e.g. http://127.0.0.1:8181/v1/all-MiniLM-L6-v2)")
    yield Service(base_url, base_url, model)


class TimedEmbedder:
    """An embedder that adds up the time spent in ``embed`` (the library's query embedding
    during a recall: what "query embedding excluded" subtracts)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int | None:
        return self.inner.dimension  # type: ignore[no-any-return]

    def embed(self, texts: list[str]) -> list[list[float]]:
        t0 = time.perf_counter()
        try:
            return self.inner.embed(texts)  # type: ignore[no-any-return]
        finally:
            with self._lock:
                self.seconds += time.perf_counter() - t0


def vector_store(home: Path, service: Service) -> Path:
    """A copy of the built store ``home`` with every node's vector (cached beside it, by the
    model and the way the library embeds a node's text: a copy of vectors made otherwise
    would have them dropped and made again on open, SPEC §5.7)."""
    from memory_rdf._vectors import TEXT_RECIPE

    slug = "".join(c if c.isalnum() else "-" for c in service.model)[:40]
    target = home.with_name(f"{home.name}-vectors-{slug}-{TEXT_RECIPE}")
    if (target / "vectors.json").exists():
        return target
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(home, target)
    from memory_rdf import OpenAIEmbedder

    start = time.perf_counter()
    with OpenAIEmbedder(service.model, service.base_url) as embedder, MemoryManager(
            "locomo", data_dir=target, config=Config(auto_compress=False),
            embedder=embedder) as mem:
        written = mem.fill_vectors()  # a store only recalled gets none otherwise
        stats = mem.stats()
    if stats.get("vectors_missing"):
        sys.exit(f"{target}: {stats['vectors_missing']} nodes still without a vector")
    (target / "vectors.json").write_text(json.dumps({
        "vectors": stats.get("vectors"), "written": written, "model": service.model,
        "seconds": round(time.perf_counter() - start, 1)}))
    return target


def embedding_entries(lines: list[str], scores: Any) -> list[str]:
    """The raw turns by similarity to the question, the most similar first (200 at most)."""
    import numpy as np

    order = np.argsort(-scores, kind="stable")[:200]
    return [lines[int(i)] for i in order]


def fused_entries(bm25: BM25, lines: list[str], keywords: Sequence[str], scores: Any,
                  k: int = 60) -> list[str]:
    """BM25 and the embedding ranking fused by reciprocal rank (k = 60; issue 37's 50.5%)."""
    import numpy as np

    fused: dict[int, float] = defaultdict(float)
    for rank, i in enumerate(bm25.top_ids(tuple(keywords), len(lines))):
        fused[i] += 1 / (k + rank + 1)
    for rank, i in enumerate(np.argsort(-scores, kind="stable")):
        fused[int(i)] += 1 / (k + rank + 1)
    order = sorted(fused, key=lambda i: (-fused[i], i))[:200]
    return [lines[i] for i in order]


def evaluate_locomo(args: argparse.Namespace) -> None:
    with embedding_service(args) as service:
        _evaluate_locomo(args, service)


def _evaluate_locomo(args: argparse.Namespace, service: Service | None) -> None:
    files = sorted(args.data.glob("*.json"))
    if args.conversations:
        wanted = set(args.conversations.split(","))
        files = [f for f in files if f.stem in wanted]
    if not files:
        sys.exit(DATA_HELP.format(path=args.data))
    methods = [f"{m} d{d}" for m in MODES for d in DEPTHS] + ["BM25", "BM25 + neighbours"]
    if service is not None:
        methods += [f"{m} d{d}" for m in SEMANTIC_MODES for d in DEPTHS] + EMBEDDING_METHODS
    if args.methods:
        wanted_methods = [m.strip() for m in args.methods.split(",")]
        unknown = sorted(set(wanted_methods) - set(methods))
        if unknown:
            sys.exit(f"unknown methods {unknown}; known: {methods}")
        methods = [m for m in methods if m in wanted_methods]
    tallies = {m: Tally() for m in methods}
    diagnostics: dict[str, int] = defaultdict(int)
    total_turns = total_questions = 0
    builds = []
    for path in files:
        conv = load(path)
        questions = conv.questions
        if args.questions and args.questions < len(questions):  # evenly spaced: every category
            step = len(questions) / args.questions
            questions = [questions[int(i * step)] for i in range(args.questions)]
        total_turns += len(conv.turns)
        total_questions += len(questions)
        library = [m for m in tallies if m.split(" d")[0] in (*MODES, *SEMANTIC_MODES)]
        semantic = [m for m in tallies if m.split(" d")[0] in SEMANTIC_MODES]
        home = build(conv, args) if library else None
        if home is not None:
            builds.append((conv.name, json.loads((home / "built.json").read_text())))
        lines = [t.line for t in conv.turns]
        words = {t.dia_id: content_words(t.text) for t in conv.turns}
        texts = {t.dia_id: t.text for t in conv.turns}
        bm25 = BM25(lines)
        similarity: Any = None  # questions × raw turns, when an embedder is given
        if service is not None and any(m in tallies for m in EMBEDDING_METHODS):
            embed = Embeddings(*service.pair)
            try:
                similarity = embed([q.text for q in questions]) @ embed(lines).T
            finally:
                embed.close()
        config = Config(auto_compress=False)
        # the copy with vectors is made before the built store is opened (never copy it live)
        vectors_home = (vector_store(home, service) if semantic and home is not None
                        and service is not None else None)
        with ExitStack() as stack:
            mem = (stack.enter_context(MemoryManager("locomo", data_dir=home, config=config))
                   if home is not None else None)
            timed_embedder: TimedEmbedder | None = None
            mem_semantic: MemoryManager | None = None
            if vectors_home is not None and service is not None:
                from memory_rdf import OpenAIEmbedder

                timed_embedder = TimedEmbedder(stack.enter_context(
                    OpenAIEmbedder(service.model, service.query_url)))
                mem_semantic = stack.enter_context(MemoryManager(
                    "locomo", data_dir=vectors_home, config=config, embedder=timed_embedder))
            if mem is not None:
                for key, value in store_diagnostics(
                    conv, mem, {e for q in questions for e in q.evidence}
                ).items():
                    diagnostics[key] += value
            start = time.perf_counter()
            for qi, q in enumerate(questions, 1):
                keywords = list(dict.fromkeys(tokenize(q.text)))
                evidence = [words[e] for e in q.evidence]
                groups = [evidence_group(q.text, texts[e]) for e in q.evidence]
                for mode in MODES:
                    for depth in DEPTHS:
                        if f"{mode} d{depth}" not in tallies or mem is None:
                            continue
                        text, ms = timed(mem.recall, keywords, depth=depth, entry=mode,
                                         max_chars=max(BUDGETS))
                        entries = text.split(SEP) if text else []
                        tallies[f"{mode} d{depth}"].add(q.category, entries, evidence, ms,
                                                        groups)
                if mem_semantic is not None and timed_embedder is not None:
                    query_ms = 0.0  # the query's first embedding (the library caches it)
                    for mode in SEMANTIC_MODES:
                        for depth in DEPTHS:
                            name = f"{mode} d{depth}"
                            if name not in tallies:
                                continue
                            before = timed_embedder.seconds
                            text, ms = timed(mem_semantic.recall, keywords, depth=depth,
                                             entry=SEMANTIC_ENTRY[mode],
                                             max_chars=max(BUDGETS), query=q.text)
                            embed_ms = (timed_embedder.seconds - before) * 1000
                            query_ms = query_ms or embed_ms
                            entries = text.split(SEP) if text else []
                            tallies[name].add(q.category, entries, evidence, ms - embed_ms,
                                              groups)
                            tallies[name].ms_with_query.append(ms - embed_ms + query_ms)
                for name, nb in (("BM25", False), ("BM25 + neighbours", True)):
                    if name not in tallies:
                        continue
                    entries, ms = timed(bm25_entries, bm25, lines, keywords, nb)
                    tallies[name].add(q.category, entries, evidence, ms, groups)
                if similarity is not None:  # the query's embedding is not in the time
                    row = similarity[qi - 1]
                    if "embedding" in tallies:
                        entries, ms = timed(embedding_entries, lines, row)
                        tallies["embedding"].add(q.category, entries, evidence, ms, groups)
                    if "BM25 + embedding" in tallies:
                        entries, ms = timed(fused_entries, bm25, lines, keywords, row)
                        tallies["BM25 + embedding"].add(q.category, entries, evidence, ms,
                                                        groups)
                if qi % 10 == 0 or qi == len(questions):
                    print(f"\r  {conv.name}: question {qi}/{len(questions)}, "
                          f"{time.perf_counter() - start:.0f} s", end="", file=sys.stderr,
                          flush=True)
            print(file=sys.stderr)

    print(f"LoCoMo ({args.data.name}): {len(files)} conversations "
          f"({', '.join(f.stem for f in files)}), {total_turns} turns, {total_questions} "
          f"questions with evidence; built with HeuristicModel, Config(), {args.slices} "
          f"compression slice(s) per remember of one exchange")
    for name, info in builds:
        print(f"  {name}: {info['remembers']} remembers → {info['nodes']} nodes, "
              f"{info['links']} links, {info['dangling_links']} dangling "
              f"(built in {info['seconds']} s)")
    n = diagnostics["evidence"]
    if n:
        print(f"evidence turns held by one segment of the segmentation: "
              f"{diagnostics['one_segment']}/{n} ({100 * diagnostics['one_segment'] / n:.1f}%); "
              f"by one stored node after compression: {diagnostics['one_node']}/{n} "
              f"({100 * diagnostics['one_node'] / n:.1f}%)")
    print()
    report(tallies)


def report(tallies: dict[str, Tally], categories: dict[int, str] | None = None) -> None:
    cats = categories if categories is not None else CATEGORIES
    groups = sorted({g for t in tallies.values() for (_, g) in t.groups}, reverse=True)
    head = (f"{'method':<20}" + "".join(f"{'@' + str(b):>8}" for b in BUDGETS)
            + "".join(f"{str(c) + ' ' + cats[c][:6]:>11}" for c in cats)
            + "".join(f"{g[:10]:>11}" for g in groups)
            + f"{'chars':>7}{'entries':>8}{'ms p50':>8}")
    print("evidence found (%) within 2,000 / 4,000 characters; per category at 2,000; "
          + ("per group at 2,000 (paraphrase: the evidence turn shares no stemmed word with "
             "the question); " if groups else "")
          + "mean characters and entries at 2,000; recall p50 latency")
    print(head)
    for name, t in tallies.items():
        if not t.ms:
            continue
        print(f"{name:<20}" + "".join(f"{pct(t.share(b)):>8}" for b in BUDGETS)
              + "".join(f"{pct(t.share(BUDGETS[0], c)):>11}" for c in cats)
              + "".join(f"{pct(t.group_share(BUDGETS[0], g)):>11}" for g in groups)
              + f"{statistics.mean(t.chars[BUDGETS[0]]):>7.0f}"
              + f"{statistics.mean(t.entries[BUDGETS[0]]):>8.1f}"
              + f"{statistics.median(t.ms):>8.1f}")
    for name, t in tallies.items():
        if t.ms_with_query:
            print(f"{name}: recall p50 {statistics.median(t.ms):.1f} ms, p95 "
                  f"{quantile(t.ms, 0.95):.1f} ms without the query's embedding; "
                  f"{statistics.median(t.ms_with_query):.1f} ms, p95 "
                  f"{quantile(t.ms_with_query, 0.95):.1f} ms with it")
    if groups:
        first = next(t for t in tallies.values() if t.groups)
        print("evidence turns per group: " + ", ".join(
            f"{g} {first.group_share(BUDGETS[0], g)[1]}" for g in groups))
    print()


def evaluate_keyword_eval(args: argparse.Namespace) -> None:
    """keyword_eval's bilingual conversation, built as that script builds it (one exchange per
    remember, two compression slices per session); a fact is found when its answer string is
    in the context."""
    sessions = conversation(18, 9, 5)
    turns = [t for s in sessions for ex in s for t in ex]
    home = args.work / "keyword-eval"
    if home.exists():
        shutil.rmtree(home)
    methods = [f"{m} d{d}" for m in MODES for d in DEPTHS] + ["BM25", "BM25 + neighbours"]
    tallies = {m: Tally() for m in methods}
    bm25 = BM25(turns)
    with MemoryManager("eval", data_dir=home, config=Config(auto_compress=False)) as mem:
        for session in sessions:
            for user, reply in session:
                mem.remember([{"role": "user", "content": user},
                              {"role": "assistant", "content": reply}])
            mem.wait_idle()
            for _ in range(2):
                mem.run_compression_slice()
        for fact in FACTS:
            kind = int(fact.link)
            keywords = list(fact.keywords)
            for mode in MODES:
                for depth in DEPTHS:
                    text, ms = timed(mem.recall, keywords, depth=depth, entry=mode,
                                     max_chars=max(BUDGETS))
                    tallies[f"{mode} d{depth}"].add_answer(
                        kind, text.split(SEP) if text else [], fact.evidence, ms)
            for name, nb in (("BM25", False), ("BM25 + neighbours", True)):
                entries, ms = timed(bm25_entries, bm25, turns, keywords, nb)
                tallies[name].add_answer(kind, entries, fact.evidence, ms)
    print(f"keyword_eval conversation: 18 sessions, {len(turns)} turns, {len(FACTS)} facts "
          "(12 same-turn, 8 link-only); found = the answer string is in the context")
    report(tallies, {0: "same-turn", 1: "link-only"})


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA_DEFAULT,
                        help="folder of the LoCoMo conversation files (default: %(default)s)")
    parser.add_argument("--work", type=Path, default=WORK_DEFAULT,
                        help="cache of built stores (default: %(default)s)")
    parser.add_argument("--conversations", default="",
                        help="comma-separated conversation names (file stems), e.g. 41,42")
    parser.add_argument("--questions", type=int, default=0,
                        help="only N evenly spaced questions of each conversation (0 = all)")
    parser.add_argument("--slices", type=int, default=1,
                        help="compression slices after each remember (Config() runs one)")
    parser.add_argument("--methods", default="",
                        help='comma-separated methods to run, e.g. "both d2,BM25" (default: all)')
    parser.add_argument("--embedder", default="",
                        help="an embedding model: 'minilm' (all-MiniLM-L6-v2, the bundled "
                             "server started in this process; the embed-bench extra) or "
                             "BASE_URL/MODEL of an OpenAI-compatible server; adds the "
                             "embedding rows")
    parser.add_argument("--embedder-model", default="",
                        help="the model's name when it holds a '/' (--embedder is then the "
                             "base URL alone)")
    parser.add_argument("--rebuild", action="store_true", help="ignore cached stores")
    parser.add_argument("--skip-locomo", action="store_true")
    parser.add_argument("--skip-keyword-eval", action="store_true")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    if not args.skip_locomo:
        evaluate_locomo(args)
    if not args.skip_keyword_eval:
        evaluate_keyword_eval(args)


if __name__ == "__main__":
    main()
