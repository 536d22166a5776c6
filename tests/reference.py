"""A pure-Python reference model of the memory dynamics of SPEC §5.1–§5.4.

Plain dicts, no store, no scheduler, no model retries: only the rules, written from the SPEC
so that the property tests (``test_properties.py``) can run the same operations on the real
store and on this model and compare the results.

State:

* ``nodes``: ``{id: {content, phrase, keywords, scans, original, created}}`` — ``created`` is
  a creation sequence number (the order of ``createdAt``);
* ``links``: ``{(source, target): [strength, relation]}`` — ``""`` = no name; a link whose
  target is not in ``nodes`` is dangling;
* ``focus``: ``[(id, order)]``, newest first (larger order = more recent).

Modelling decisions where the SPEC leaves room (they match the implementation):

* an unnamed link carries no relation, so it never passes a ``relations`` filter, even one
  that lists ``""``;
* a compression result is accepted when its content is non-empty and at most
  1.25 × target characters; the caller's ``process_fn`` returns the already normalised
  (stripped) ``(content, phrase, keywords)``;
* importance is summed over the touching links in ``(source, target)`` order;
* recall (SPEC §5.4 v3): the entry's memory template is given ``content`` only (the property
  tests set a template without ``{date}``: the reference keeps no clock); with keywords, of
  the results in one path-strength band (a factor of 4: ``(1/4^(b+1), 1/4^b]``) the later
  created comes first, in the places the band's results hold in the walk's order.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from typing import Any

import snowballstemmer  # type: ignore[import-untyped]

from memory_rdf import Config
from memory_rdf._text import ENGLISH_STOP_WORDS, is_cjk_text

_STEM = snowballstemmer.stemmer("english")
#: SPEC §5.4 v3: the display forms of the built-in relation names.
DISPLAY = {"上文": "previous", "下文": "next", "回应": "answers", "提到": "mentions",
           "涉及": "relates to"}

NEXT = "下文"  # link i → i+1 (SPEC §5.1 step 3)
PREVIOUS = "上文"  # link i+1 → i

Processed = tuple[str, str, list[str]]  # content, phrase, keywords
ProcessFn = Callable[[str, int], Processed]
RelationFn = Callable[[str, str], str]


class Reference:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.nodes: dict[str, dict[str, Any]] = {}
        self.links: dict[tuple[str, str], list[Any]] = {}
        self.focus: list[tuple[str, int]] = []
        self._seq = 0

    def focus_ids(self) -> list[str]:
        return [nid for nid, _ in self.focus]

    # -- §5.1 steps 3–4 ------------------------------------------------------------------------

    def remember(
        self, segments_processed: Sequence[Processed], new_ids: Sequence[str],
        relation_fn: RelationFn,
    ) -> None:
        cfg = self.config
        current = list(self.focus)  # the focus before this remember
        for nid, (content, phrase, keywords) in zip(new_ids, segments_processed, strict=True):
            self.nodes[nid] = {
                "content": content, "phrase": phrase, "keywords": list(keywords),
                "scans": 0, "original": len(content), "created": self._seq,
            }
            self._seq += 1
        for a, b in zip(new_ids, new_ids[1:], strict=False):
            self.links[(a, b)] = [cfg.link_initial_strength, NEXT]
            self.links[(b, a)] = [cfg.link_initial_strength, PREVIOUS]
        for nid in new_ids:
            for fid, _ in current:
                name = relation_fn(self.nodes[nid]["content"], self.nodes[fid]["content"])
                self.links[(nid, fid)] = [cfg.focus_link_strength, name]
                self.links[(fid, nid)] = [cfg.focus_link_strength, name]
        k = min(cfg.focus_limit, len(new_ids))
        top = max((order for _, order in current), default=0)
        incoming = [(nid, top + 1 + i) for i, nid in enumerate(new_ids[len(new_ids) - k:])]
        self.focus = (incoming[::-1] + current)[: cfg.focus_limit]

    # -- §5.2, §5.3 ----------------------------------------------------------------------------

    def scan_order(self) -> list[str]:
        focus = set(self.focus_ids())
        candidates = [nid for nid in self.nodes if nid not in focus]
        candidates.sort(key=lambda n: (self.nodes[n]["scans"], self.nodes[n]["created"], n))
        return candidates[: self.config.compression_batch_size]

    def forget(self, nid: str) -> None:
        del self.nodes[nid]
        for key in [k for k in self.links if k[0] == nid]:
            del self.links[key]  # links INTO nid stay, dangling

    def compression_slice(self, process_fn: ProcessFn) -> dict[str, int]:
        cfg = self.config
        threshold = cfg.link_break_threshold
        focus = set(self.focus_ids())
        report = {"forgotten": 0, "compressed": 0, "links_removed": 0}
        for nid in self.scan_order():  # the batch is chosen once, at slice start
            node = self.nodes.get(nid)
            if node is None:
                continue
            touching = sorted(k for k in self.links if nid in k)
            importance = sum(
                self.links[k][0] for k in touching if self.links[k][0] >= threshold
            )
            target = math.floor(node["original"] * min(importance, 1.0))
            if importance == 0 or target < cfg.delete_threshold:
                self.forget(nid)
                report["forgotten"] += 1
                continue
            if target < len(node["content"]):
                content, phrase, keywords = process_fn(node["content"], target)
                if content and len(content) <= 1.25 * target:
                    node.update(content=content, phrase=phrase, keywords=list(keywords))
                    report["compressed"] += 1
            for key in touching:
                if key[0] in focus:
                    continue  # links out of a current focus node do not decay
                strength = self.links[key][0] * cfg.decay_rate
                if strength < threshold:
                    del self.links[key]
                    report["links_removed"] += 1
                else:
                    self.links[key][0] = strength
            node["scans"] += 1
        return report

    # -- §5.4 ----------------------------------------------------------------------------------

    def _passes(self, relation: str, relations: Sequence[str] | None) -> bool:
        if relations is None:
            return True
        forms = {*relations, *(DISPLAY.get(r, "") for r in relations)}
        forms |= {zh for zh, en in DISPLAY.items() if en in relations}
        return relation != "" and relation in forms

    def _matches(self, nid: str, keywords: Sequence[str]) -> bool:
        """SPEC §5.4 v3 rule 4, for the Latin words of the property tests: the keyword's words
        (stop words left out unless it has no other) are words of one of the node's texts, by
        their Snowball stems."""
        if not keywords:
            return True
        node = self.nodes[nid]
        texts = [node["content"], *node["keywords"]]
        stems = [{_STEM.stemWord(w) for w in t.lower().split()} for t in texts]
        for k in keywords:
            words = k.lower().split()
            words = [w for w in words if w not in ENGLISH_STOP_WORDS] or words
            wanted = {_STEM.stemWord(w) for w in words}
            if any(wanted <= have for have in stems):
                return True
        return False

    def recall(
        self, keywords: Sequence[str], relations: Sequence[str] | None, depth: int
    ) -> str:
        cfg = self.config
        threshold, limit = cfg.link_break_threshold, cfg.max_search_results
        needles = [k.strip().lower() for k in keywords if k.strip()]
        significant = [k for k in needles if k not in ENGLISH_STOP_WORDS]
        needles = significant or needles
        # (−path strength, seed rank (0 = newest focus), discovery order, node, hop)
        heap = [(-1.0, rank, rank, nid, 0) for rank, nid in enumerate(self.focus_ids())]
        heapq.heapify(heap)
        discovered = len(heap)
        visited: set[str] = set()
        results: list[str] = []
        strengths: list[float] = []
        while heap:
            neg, rank, _, nid, hop = heapq.heappop(heap)
            if nid in visited:
                continue
            visited.add(nid)
            if self._matches(nid, needles):
                results.append(nid)
                strengths.append(-neg)
                if limit and len(results) >= limit:
                    break
            if hop < depth:
                out = sorted(
                    ((t, w) for (s, t), (w, rel) in self.links.items()
                     if s == nid and t in self.nodes and w >= threshold
                     and self._passes(rel, relations)),
                    key=lambda item: (-item[1], item[0]),
                )
                for target, strength in out:
                    heapq.heappush(heap, (neg * strength, rank, discovered, target, hop + 1))
                    discovered += 1
        bands: dict[int, list[int]] = {}
        for i, strength in enumerate(strengths):
            band = 0 if strength >= 1 else math.floor(math.log(strength) / -math.log(4) + 1e-9)
            bands.setdefault(band, []).append(i)
        ordered = list(results)
        for places in bands.values() if needles else ():
            latest = sorted(places, key=lambda i: -self.nodes[results[i]]["created"])
            for place, i in zip(places, latest, strict=True):
                ordered[place] = results[i]
        return self.render(ordered, relations)

    def render(self, results: Sequence[str], relations: Sequence[str] | None) -> str:
        t = self.config.templates
        threshold = self.config.link_break_threshold
        entries: list[str] = []
        for nid in results:
            node = self.nodes[nid]
            entries.append(t.memory.format(content=node["content"]))
            dangling = sorted(
                (-w, rel) for (s, tgt), (w, rel) in self.links.items()
                if s == nid and tgt not in self.nodes and w >= threshold
                and self._passes(rel, relations)
            )
            if not dangling:
                continue
            # SPEC §5.4 v3: the perception entry in the language of the result's content, the
            # relation names in their display form
            chinese = is_cjk_text(node["content"])
            shown = [rel if chinese else DISPLAY.get(rel, rel) for _, rel in dangling]
            names = [rel for rel in dict.fromkeys(shown) if rel]
            named, unnamed, joiner = t.perception(chinese)
            if names:
                entries.append(named.format(phrase=node["phrase"], relations=joiner.join(names)))
            else:
                entries.append(unnamed.format(phrase=node["phrase"]))
        return t.entry_separator.join(entries)
