"""The prompts of the HTTP small models: one per task, each with the JSON schema of its answer.

Every request is two messages: a system message with the instructions, and a user message
holding the input as a JSON object (so texts with newlines or quotes are never ambiguous, and
the answer's JSON strings are written the way the input's were). The instructions are in
Chinese when the input is mostly Chinese (:func:`memory_rdf._text.is_cjk_text`), else in
English, so the model answers in the language of the memory.

The answer shapes are normative (SPEC §4):

========================  ================================================================
task                      answer
========================  ================================================================
segment                   ``{"segments": [str, ...]}``
process                   ``{"content": str, "phrase": str, "keywords": [str, ...]}``
process_batch             ``{"items": [{"content", "phrase", "keywords"}, ...]}``, n items
relation                  ``{"relation": str}``
relation_batch            ``{"relations": [str, ...]}``, n items
========================  ================================================================

The schemas state every rule a server can enforce while decoding: every property required,
``additionalProperties: false``, array ``minItems``/``maxItems`` (a batch's length; 1–5
keywords) and the phrase's ``maxLength`` of 20. Rules a schema cannot say (at least 3
keywords unless the text is very short, segments that cover the input) are stated in the
prompt and checked on the answer (``_answers``). A server whose strict mode rejects one of
these keywords works with ``OpenAIModel(..., strict=False)``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_rdf._text import is_cjk_text
from memory_rdf._types import KEYWORDS_MAX, PHRASE_MAX

__all__ = [
    "Prompt",
    "process_batch_prompt",
    "process_prompt",
    "relation_batch_prompt",
    "relation_prompt",
    "segment_prompt",
]

# Texts of at most ``_answers.SHORT_TEXT`` characters may have fewer keywords, so the schema
# asks for 1–``KEYWORDS_MAX`` and the answer check for ``KEYWORDS_MIN``.


@dataclass(frozen=True)
class Prompt:
    """One request: ``task`` (for accounting), the schema ``name`` (OpenAI's
    ``json_schema.name``), the two messages, and the JSON schema of the answer."""

    task: str
    name: str
    system: str
    user: str
    schema: dict[str, Any]

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


def _obj(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _strings(min_items: int | None = None, max_items: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
    if min_items is not None:
        schema["minItems"] = min_items
    if max_items is not None:
        schema["maxItems"] = max_items
    return schema


def _processed_schema() -> dict[str, Any]:
    return _obj(
        {
            "content": {"type": "string"},
            "phrase": {"type": "string", "maxLength": PHRASE_MAX},
            "keywords": _strings(1, KEYWORDS_MAX),
        }
    )


def _input(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


# --------------------------------------------------------------------------- segment

_SEGMENT_ZH = """\
你是记忆系统里的小模型，负责把一段对话记录切分成记忆片段。
输入是 JSON：{"text": 对话记录}。对话每行一条消息，格式为“角色: 内容”。
要求：
1. 按原来的顺序切分成若干段，每段讲一件事，通常一到三句话，不超过约 200 字；\
相邻的短消息讲同一件事时合成一段。
2. 照抄原文：不要总结、改写、翻译、增加或遗漏内容；每行开头的角色标签\
（user: / assistant: / system:）原样保留。
3. 指代消解：每段要能单独看懂。能确定所指时，把代词（他、她、它、他们、这个、那个等）\
换成它所指的人或事物。例如“张伟负责登录模块。他下周三上线。”切成\
“张伟负责登录模块。”和“张伟下周三上线。”。
只输出 JSON：{"segments": ["第一段", "第二段", ...]}。"""

_SEGMENT_EN = """\
You are the small model of a memory system. Cut a chat record into memory segments.
The input is JSON: {"text": the chat record}. Each line is one message, "role: content".
Rules:
1. Keep the original order. Each segment is about one thing, usually one to three sentences, \
at most about 200 characters; merge consecutive short messages about the same thing.
2. Copy the text: do not summarize, rewrite, translate, add or drop anything; keep the role \
label (user: / assistant: / system:) at the start of each line as it is.
3. Resolve references so that each segment stands on its own: where it is clear what a \
pronoun (he, she, it, they, this, that) names, replace it with that person or thing. \
Example: "Zhang Wei owns the login module. He ships it on Wednesday." becomes \
"Zhang Wei owns the login module." and "Zhang Wei ships the login module on Wednesday.".
Answer with JSON only: {"segments": ["first segment", "second segment", ...]}."""


def segment_prompt(text: str) -> Prompt:
    system = _SEGMENT_ZH if is_cjk_text(text) else _SEGMENT_EN
    schema = _obj({"segments": _strings(1)})
    return Prompt("segment", "segments", system, _input({"text": text}), schema)


# --------------------------------------------------------------------------- process

_PROCESS_FIELDS_ZH = """\
- phrase：10–20 个字的短语，概括这段记忆（不超过 20 个字符）；
- keywords：3–5 个关键词，名词或名词短语（人名、项目、产品、技术、地点、时间等），\
用原文里的写法，按重要性排序。"""

_PROCESS_FIELDS_EN = """\
- phrase: a 10-20 character phrase that sums the memory up (at most 20 characters);
- keywords: 3-5 keywords, nouns or noun phrases (people, projects, products, technologies, \
places, dates), written as in the text, most important first."""

_CONTENT_ZH = "- content：原文，一字不改；"
_CONTENT_EN = "- content: the text, unchanged;"
_SHORTEN_ZH = (
    "- content：把原文改写为不超过 max_characters 个字符（标点和空格都算），"
    "保留关键事实（谁、做了什么、何时、数字、名称），删去客套和重复；"
)
_SHORTEN_EN = (
    "- content: the text rewritten in at most max_characters characters (punctuation and "
    "spaces count), keeping the key facts (who, what, when, numbers, names) and dropping "
    "pleasantries and repetition;"
)

_PROCESS_ZH = """\
你是记忆系统里的小模型，为一段记忆生成摘要信息。
输入是 JSON：{input}。
输出 JSON：{{"content": ..., "phrase": ..., "keywords": [...]}}，其中
{content}
{fields}
只输出 JSON。"""

_PROCESS_EN = """\
You are the small model of a memory system. Describe one memory.
The input is JSON: {input}.
Answer with JSON: {{"content": ..., "phrase": ..., "keywords": [...]}}, where
{content}
{fields}
Answer with JSON only."""


def process_prompt(text: str, target_length: int | None = None) -> Prompt:
    zh = is_cjk_text(text)
    if target_length is None:
        spec = '{"text": 记忆原文}' if zh else '{"text": the memory}'
        content = _CONTENT_ZH if zh else _CONTENT_EN
        user = _input({"text": text})
    else:
        spec = (
            '{"text": 记忆原文, "max_characters": 字数上限}'
            if zh
            else '{"text": the memory, "max_characters": the length limit}'
        )
        content = _SHORTEN_ZH if zh else _SHORTEN_EN
        user = _input({"text": text, "max_characters": target_length})
    template = _PROCESS_ZH if zh else _PROCESS_EN
    system = template.format(
        input=spec, content=content, fields=_PROCESS_FIELDS_ZH if zh else _PROCESS_FIELDS_EN
    )
    return Prompt("process", "processed", system, user, _processed_schema())


_PROCESS_BATCH_ZH = """\
你是记忆系统里的小模型，为多段记忆生成摘要信息。
输入是 JSON：{{"texts": [记忆原文, ...]}}，共 {n} 段。
对每一段给出 {{"content": ..., "phrase": ..., "keywords": [...]}}，其中
{content}
{fields}
输出 JSON：{{"items": [...]}}，items 恰好 {n} 项，按输入顺序与 texts 一一对应。只输出 JSON。"""

_PROCESS_BATCH_EN = """\
You are the small model of a memory system. Describe several memories.
The input is JSON: {{"texts": [memory, ...]}}, {n} texts.
For each text give {{"content": ..., "phrase": ..., "keywords": [...]}}, where
{content}
{fields}
Answer with JSON: {{"items": [...]}}, exactly {n} items, one per text, in input order. \
Answer with JSON only."""


def process_batch_prompt(texts: Sequence[str]) -> Prompt:
    n = len(texts)
    zh = is_cjk_text("\n".join(texts))
    template = _PROCESS_BATCH_ZH if zh else _PROCESS_BATCH_EN
    system = template.format(
        n=n,
        content=_CONTENT_ZH if zh else _CONTENT_EN,
        fields=_PROCESS_FIELDS_ZH if zh else _PROCESS_FIELDS_EN,
    )
    items = {"type": "array", "items": _processed_schema(), "minItems": n, "maxItems": n}
    return Prompt(
        "process_batch", "processed_items", system, _input({"texts": list(texts)}),
        _obj({"items": items}),
    )


# --------------------------------------------------------------------------- relation

_RELATION_NAMES_ZH = """\
关系名是 2–4 个字的词，说明新记忆相对于焦点记忆是什么关系，例如：属于、关于、涉及、讨论、\
提到、回应、补充。两者没有关系时用空字符串 ""。"""

_RELATION_NAMES_EN = """\
A relation name is one or two lowercase words saying what the new memory is to the focus \
memory, for example: about, part of, mentions, discusses, answers, adds to. Use the empty \
string "" when the two are unrelated."""

_RELATION_ZH = """\
你是记忆系统里的小模型，为两段记忆之间的联系命名。
输入是 JSON：{"new_memory": 新记忆, "focus_memory": 焦点记忆（正在想的事）}。
""" + _RELATION_NAMES_ZH + """
只输出 JSON：{"relation": "关系名"}。"""

_RELATION_EN = """\
You are the small model of a memory system. Name the link between two memories.
The input is JSON: {"new_memory": ..., "focus_memory": what is currently in mind}.
""" + _RELATION_NAMES_EN + """
Answer with JSON only: {"relation": "name"}."""


def relation_prompt(node_content: str, focus_content: str) -> Prompt:
    zh = is_cjk_text(node_content + "\n" + focus_content)
    user = _input({"new_memory": node_content, "focus_memory": focus_content})
    schema = _obj({"relation": {"type": "string"}})
    return Prompt("relation", "relation", _RELATION_ZH if zh else _RELATION_EN, user, schema)


_RELATION_BATCH_ZH = """\
你是记忆系统里的小模型，为多对记忆之间的联系命名。
输入是 JSON：{{"new_memories": [新记忆, ...], "focus_memories": [焦点记忆, ...], \
"pairs": [[i, j], ...]}}。[i, j] 表示第 i 条新记忆与第 j 条焦点记忆（都从 1 开始编号）。
{names}
输出 JSON：{{"relations": [...]}}，按 pairs 的顺序每对一个关系名，恰好 {n} 项。只输出 JSON。"""

_RELATION_BATCH_EN = """\
You are the small model of a memory system. Name the links between pairs of memories.
The input is JSON: {{"new_memories": [...], "focus_memories": [...], "pairs": [[i, j], ...]}}; \
[i, j] pairs new memory i with focus memory j (both numbered from 1).
{names}
Answer with JSON: {{"relations": [...]}}, one name per pair in the order of "pairs", \
exactly {n} names. Answer with JSON only."""


def relation_batch_prompt(pairs: Sequence[tuple[str, str]]) -> Prompt:
    """Each distinct text is sent once; ``pairs`` refers to them by number, so n new nodes ×
    f focus nodes cost n + f texts, not 2·n·f."""
    new: dict[str, int] = {}
    focus: dict[str, int] = {}
    refs = []
    for node_content, focus_content in pairs:
        i = new.setdefault(node_content, len(new) + 1)
        j = focus.setdefault(focus_content, len(focus) + 1)
        refs.append([i, j])
    n = len(pairs)
    zh = is_cjk_text("\n".join([*new, *focus]))
    template = _RELATION_BATCH_ZH if zh else _RELATION_BATCH_EN
    system = template.format(n=n, names=_RELATION_NAMES_ZH if zh else _RELATION_NAMES_EN)
    user = _input({"new_memories": list(new), "focus_memories": list(focus), "pairs": refs})
    relations = _strings(n, n)
    return Prompt("relation_batch", "relations", system, user, _obj({"relations": relations}))
