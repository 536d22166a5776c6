"""The HTTP small models against a real HTTP server on loopback (SPEC §4, §5.1, §5.2).

The server (``benchmarks/_fake_llm.py``) speaks Ollama's ``/api/chat`` and OpenAI's
``/chat/completions``, answers from the JSON schema each request carries, and can be told to
fail. Everything else is real: the httpx client, the manager, its retries, the store.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import benchmarks._fake_llm as fake_llm
from benchmarks._fake_llm import RELATION, FakeLLM, fake_processed
from memory_rdf import (
    Config,
    ConfigError,
    MemoryManager,
    MemorySystem,
    ModelError,
    PermanentModelError,
    Processed,
    SmallModel,
)
from memory_rdf._calls import CallStats, run_blocking, thread_usage, with_retries
from memory_rdf.small_model import (
    HeuristicModel,
    HTTPModel,
    OllamaModel,
    OpenAIModel,
    model_from_env,
)
from memory_rdf.small_model._answers import (
    check_relation,
    check_segments,
    coverage_problem,
)

from _graph import links, set_strength
from helpers import FAST, say

BACKENDS = ("ollama", "openai")
MODEL = "fake-model"
FIVE = [f"第{i}件事：张伟负责模块{i}的 JWT 登录" for i in range(1, 6)]
FIVE_MORE = [f"note {i}: the release {i} needs payment checks" for i in range(1, 6)]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def server() -> Iterator[FakeLLM]:
    with FakeLLM() as s:
        yield s


@pytest.fixture
def make_model(server: FakeLLM) -> Iterator[Callable[..., HTTPModel]]:
    made: list[HTTPModel] = []

    def make(backend: str = "ollama", name: str = MODEL, **kw: Any) -> HTTPModel:
        model: HTTPModel
        if backend == "ollama":
            model = OllamaModel(name, server.url, **kw)
        else:
            model = OpenAIModel(name, server.openai_url, **kw)
        made.append(model)
        return model

    yield make
    for m in made:
        m.close()


@pytest.fixture
def open_mem(data_dir: Path) -> Iterator[Callable[..., MemoryManager]]:
    made: list[MemoryManager] = []

    def make(model: SmallModel, agent: str = "agent", config: Config = FAST) -> MemoryManager:
        mem = MemoryManager(agent, data_dir=data_dir, config=config, model=model)
        mem.initialize()
        made.append(mem)
        return mem

    yield make
    for mem in made:
        mem.close(timeout=10)


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """Scripted answers of the fake server by task (segment, process, ...): the request still
    goes over HTTP and is answered as JSON; tasks not scripted are answered from the schema."""
    scripted: dict[str, dict[str, Any]] = {}
    real = fake_llm._answer

    def answer(schema: dict[str, Any], task: str, payload: dict[str, Any]) -> dict[str, Any]:
        return scripted[task] if task in scripted else real(schema, task, payload)

    monkeypatch.setattr(fake_llm, "_answer", answer)
    return scripted


def remember(mem: MemoryManager, lines: list[str]) -> None:
    """One remember whose text the fake server cuts into these lines."""
    mem.remember(say(*lines))
    assert mem.wait_idle(timeout=20)


def nodes(mem: MemoryManager) -> list[tuple[str, str, list[str]]]:
    """(content, phrase, keywords) of every node, in creation order."""
    rows = mem.sparql(
        """SELECT ?n ?c ?p ?t WHERE { ?n a memory:Node ; memory:content ?c ;
             memory:phrase ?p ; memory:createdAt ?t }"""
    )
    kw_rows = mem.sparql("SELECT ?n ?k WHERE { ?n memory:keyword ?k }")
    assert isinstance(rows, list) and isinstance(kw_rows, list)
    keywords: dict[str, list[str]] = {}
    for r in kw_rows:
        keywords.setdefault(r["n"], []).append(r["k"])  # type: ignore[index]
    rows.sort(key=lambda r: r["t"])  # type: ignore[index]
    return [(r["c"], r["p"], sorted(keywords.get(r["n"], []))) for r in rows]  # type: ignore[index]


def lines(contents: list[str]) -> list[str]:
    return [f"user: {c}" for c in contents]


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("backend", BACKENDS)
def test_round_trip_through_a_memory_manager(
    backend: str, server: FakeLLM, make_model: Callable[..., HTTPModel],
    open_mem: Callable[..., MemoryManager],
) -> None:
    model = make_model(backend)
    assert isinstance(model, SmallModel)
    mem = open_mem(model)
    remember(mem, ["张伟负责 JWT 登录", "下周三发布 v2.0"])
    remember(mem, ["the payment callback times out"])
    assert "] user: 张伟负责 JWT 登录" in mem.recall(["JWT"])
    assert "payment callback" in mem.recall(["payment"])
    assert mem.stats()["nodes"] == 3 and mem.failed_tasks() == []
    # The focus links of the second remember are named by the model.
    named = {k: v[1] for k, v in links(mem).items() if "payment" in k[0]}
    assert named and set(named.values()) == {RELATION}
    path = "/api/chat" if backend == "ollama" else "/v1/chat/completions"
    assert {r.path for r in server.requests()} == {path}


@pytest.mark.parametrize("backend", BACKENDS)
def test_requests_carry_the_answer_schema(
    backend: str, server: FakeLLM, make_model: Callable[..., HTTPModel],
    open_mem: Callable[..., MemoryManager],
) -> None:
    mem = open_mem(make_model(backend))
    remember(mem, FIVE)
    server.reset()
    remember(mem, FIVE_MORE)
    by_task = {r.task: r for r in server.requests()}
    assert set(by_task) == {"segment", "process_batch", "relation_batch"}
    for r in by_task.values():
        if backend == "ollama":
            assert r.body["stream"] is False and r.body["options"]["temperature"] == 0
            assert r.body["format"] is r.schema
        else:
            fmt = r.body["response_format"]
            assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
            assert fmt["json_schema"]["name"] and r.body["temperature"] == 0
        assert r.schema["type"] == "object" and r.schema["additionalProperties"] is False
        assert r.body["model"] == MODEL
    items = by_task["process_batch"].schema["properties"]["items"]
    assert items["minItems"] == items["maxItems"] == 5
    item = items["items"]["properties"]
    assert set(item) == {"content", "phrase", "keywords"}
    assert item["phrase"] == {"type": "string", "maxLength": 20}
    assert (item["keywords"]["minItems"], item["keywords"]["maxItems"]) == (1, 5)
    relations = by_task["relation_batch"].schema["properties"]["relations"]
    assert relations["minItems"] == relations["maxItems"] == 25
    assert by_task["segment"].schema["properties"]["segments"]["type"] == "array"


def test_five_segments_into_five_focus_nodes_take_three_requests(
    server: FakeLLM, make_model: Callable[..., HTTPModel], open_mem: Callable[..., MemoryManager]
) -> None:
    mem = open_mem(make_model())
    remember(mem, FIVE)
    assert server.count() == 2  # no focus yet: segment + process_batch
    server.reset()
    remember(mem, FIVE_MORE)
    assert server.count() <= 3
    assert [r.task for r in server.requests()] == ["segment", "process_batch", "relation_batch"]
    assert mem.stats()["nodes"] == 10


def test_compression_shortens_through_the_model(
    server: FakeLLM, make_model: Callable[..., HTTPModel], open_mem: Callable[..., MemoryManager]
) -> None:
    mem = open_mem(make_model(), config=Config(
        retry_initial_delay=0, retry_max_delay=0, max_retries=2, auto_compress=False,
        focus_limit=1,
    ))
    old = "user: " + "张伟负责登录模块的重构，预计下周三发布 v2.0 版本，" * 2
    remember(mem, [old.removeprefix("user: "), "第二段"])
    remember(mem, ["第三段"])
    set_strength(mem, old, "user: 第二段", 0.2)
    set_strength(mem, "user: 第二段", old, 0.2)
    server.reset()
    report = mem.run_compression_slice()
    assert report["compressed"] == 1 and report["model_calls"] == 1
    (request,) = server.requests("process")
    target = math.floor(len(old) * (0.2 + 0.2))
    assert '"max_characters": ' + str(target) in request.body["messages"][-1]["content"]
    assert (old[:target], ) == tuple(c for c, _, _ in nodes(mem) if c.startswith("user: 张伟"))


def test_slice_report_counts_requests_failures_and_retries(
    server: FakeLLM, make_model: Callable[..., HTTPModel], open_mem: Callable[..., MemoryManager]
) -> None:
    mem = open_mem(make_model(), config=Config(
        retry_initial_delay=0, retry_max_delay=0, max_retries=2, auto_compress=False,
        focus_limit=1,
    ))
    old = "张伟负责登录模块的重构，预计下周三发布 v2.0 版本，" * 2
    remember(mem, [old, "第二段"])
    remember(mem, ["第三段"])
    set_strength(mem, "user: " + old, "user: 第二段", 0.2)
    server.reset()
    server.misbehave("status", times=1, task="process", status=503)
    report = mem.run_compression_slice()
    assert report["compressed"] == 1
    counts = ("model_calls", "model_requests", "model_failures", "model_retries")
    assert tuple(report[k] for k in counts) == (2, 2, 1, 1)  # a 503, then the answer
    assert server.count() == 2
    assert (report["prompt_tokens"], report["completion_tokens"]) == server.tokens()
    assert report["prompt_tokens"] > 0


# --------------------------------------------------------------------------- failures, retries


@pytest.mark.parametrize("backend", BACKENDS)
def test_transient_500s_are_retried_by_the_manager(
    backend: str, server: FakeLLM, make_model: Callable[..., HTTPModel],
    open_mem: Callable[..., MemoryManager],
) -> None:
    model = make_model(backend)
    mem = open_mem(model)
    server.misbehave("status", times=2, status=500)
    remember(mem, ["张伟负责 JWT 登录", "下周三发布"])
    assert mem.failed_tasks() == []
    assert server.count("segment") == 3  # two 500s, then the answer
    assert model.usage()["failures"] == 2
    assert "JWT" in mem.recall(["JWT"])


def test_429_on_a_batch_falls_back_to_single_calls_that_retry(
    server: FakeLLM, make_model: Callable[..., HTTPModel], open_mem: Callable[..., MemoryManager]
) -> None:
    mem = open_mem(make_model())
    server.misbehave("status", times=1, task="process_batch", status=429, message="slow down")
    server.misbehave("status", times=1, task="process", status=429, message="slow down")
    remember(mem, FIVE)
    assert server.count("process_batch") == 1  # a batch is tried once
    assert server.count("process") == 6  # one single call retried after its 429
    stats = mem.stats()
    assert stats["model_retries"] == 1 and stats["model_failures"] == 2
    assert [c for c, _, _ in nodes(mem)] == lines(FIVE)
    assert [p for _, p, _ in nodes(mem)] == [fake_processed(c)["phrase"] for c in lines(FIVE)]


def test_an_invalid_batch_falls_back_at_once_without_backoff(
    server: FakeLLM, make_model: Callable[..., HTTPModel], open_mem: Callable[..., MemoryManager]
) -> None:
    slow = Config(retry_initial_delay=30, retry_max_delay=60, max_retries=15, auto_compress=False)
    mem = open_mem(make_model(), config=slow)
    start = time.perf_counter()
    server.misbehave("garbage", times=1, task="process_batch")
    remember(mem, FIVE)  # waits at most 20 s: one backoff would be 30 s
    assert [r.task for r in server.requests()] == ["segment", "process_batch"] + ["process"] * 5
    server.reset()
    server.misbehave("invalid_json", times=1, task="relation_batch")
    remember(mem, FIVE_MORE)
    tasks = [r.task for r in server.requests()]
    assert tasks == ["segment", "process_batch", "relation_batch"] + ["relation"] * 25
    assert time.perf_counter() - start < 10
    stats = mem.stats()
    assert (stats["model_failures"], stats["model_retries"]) == (2, 0)
    assert [c for c, _, _ in nodes(mem)] == lines(FIVE + FIVE_MORE)
    new_focus = {k: v for k, v in links(mem).items() if "note" in k[0] and "第" in k[1]}
    assert len(new_focus) == 25 and {rel for _, rel in new_focus.values()} == {RELATION}
    assert mem.failed_tasks() == []


def test_a_permanent_error_on_a_batch_fails_the_remember_at_once(
    server: FakeLLM, make_model: Callable[..., HTTPModel], open_mem: Callable[..., MemoryManager]
) -> None:
    mem = open_mem(make_model())
    server.misbehave("status", task="process_batch", status=400,
                     message="'format' is not a valid JSON schema")
    mem.remember(say(*FIVE))
    assert mem.wait_idle(timeout=20)
    (failed,) = mem.failed_tasks()  # kept, with what to fix: nothing lost
    assert "'format' is not a valid JSON schema" in failed["error"]
    assert [r.task for r in server.requests()] == ["segment", "process_batch"]
    assert mem.stats()["nodes"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_unknown_model_is_not_retried_and_says_what_to_fix(
    backend: str, server: FakeLLM, make_model: Callable[..., HTTPModel]
) -> None:
    model = make_model(backend, name="no-such-model")
    with pytest.raises(PermanentModelError) as info:
        run_blocking(with_retries(lambda: model.process("张伟负责登录"), FAST, CallStats(), "p"))
    assert server.count() == 1
    message = str(info.value)
    assert "no-such-model" in message and "not found" in message
    if backend == "ollama":
        assert "`ollama pull no-such-model`" in message
    else:
        assert "base URL" in message and "model name" in message


def test_unknown_model_fails_the_remember_with_the_fix(
    server: FakeLLM, make_model: Callable[..., HTTPModel], open_mem: Callable[..., MemoryManager]
) -> None:
    mem = open_mem(make_model(name="qwen-missing"))
    mem.remember(say("张伟负责 JWT 登录"))
    assert mem.wait_idle(timeout=20)
    (failed,) = mem.failed_tasks()
    assert "qwen-missing" in failed["error"] and "ollama pull qwen-missing" in failed["error"]
    assert mem.stats()["nodes"] == 0


def test_unknown_model_remember_makes_exactly_one_request(
    server: FakeLLM, make_model: Callable[..., HTTPModel], open_mem: Callable[..., MemoryManager]
) -> None:
    mem = open_mem(make_model(name="qwen-missing"))
    mem.remember(say("张伟负责 JWT 登录"))
    assert mem.wait_idle(timeout=20)
    assert len(mem.failed_tasks()) == 1
    assert server.count() == 1


def test_bad_key_and_bad_request_are_permanent() -> None:
    with FakeLLM(api_key="sk-right") as locked:
        with (
            OpenAIModel(MODEL, locked.openai_url, "sk-wrong") as wrong,
            pytest.raises(PermanentModelError, match="MEMORY_RDF_API_KEY / api_key"),
        ):
            wrong.relation("a", "b")
        with OpenAIModel(MODEL, locked.openai_url, "sk-right") as right:
            assert right.relation("a", "b") == RELATION
        assert locked.requests()[-1].headers["authorization"] == "Bearer sk-right"
    with FakeLLM() as s, OpenAIModel(MODEL, s.openai_url) as m:
        s.misbehave("status", status=400, message="'format' is not a valid JSON schema")
        with pytest.raises(PermanentModelError, match="'format' is not a valid JSON schema"):
            m.relation("a", "b")
        assert "authorization" not in s.requests()[-1].headers
        for status in (429, 503):
            s.misbehave("status", status=status)
            with pytest.raises(ModelError) as info:
                m.relation("a", "b")
            assert not isinstance(info.value, PermanentModelError)
        assert m.relation("a", "b") == RELATION
        assert m.usage()["failures"] == 3


@pytest.mark.parametrize("kind", ["garbage", "invalid_json", "wrong_shape"])
def test_garbage_answers_fall_back_and_lose_nothing(
    kind: str, server: FakeLLM, make_model: Callable[..., HTTPModel],
    open_mem: Callable[..., MemoryManager],
) -> None:
    model = make_model("openai")
    mem = open_mem(model, config=Config(retry_initial_delay=0, retry_max_delay=0,
                                        max_retries=1, auto_compress=False))
    remember(mem, FIVE[:2])
    for task in ("process", "process_batch", "relation", "relation_batch"):
        server.misbehave(kind, times=-1, task=task)
    remember(mem, FIVE_MORE[:3])
    heuristic = HeuristicModel()
    got = nodes(mem)
    assert [c for c, _, _ in got] == lines(FIVE[:2] + FIVE_MORE[:3])
    for content, phrase, keywords in got[2:]:  # SPEC §5.1 step 2: text kept, built-in summary
        fallback = heuristic.process(content)
        assert phrase == fallback.phrase and keywords == sorted(set(fallback.keywords))
    new_focus = {k: v for k, v in links(mem).items() if "note" in k[0] and "第" in k[1]}
    assert len(new_focus) == 6 and all(rel is None for _, rel in new_focus.values())
    assert model.usage()["invalid_answers"] == server.count() - 3  # all but the two segments
    assert mem.failed_tasks() == []


def test_wrong_length_batches_fall_back_to_single_calls_with_the_same_result(
    server: FakeLLM, make_model: Callable[..., HTTPModel], open_mem: Callable[..., MemoryManager]
) -> None:
    good = open_mem(make_model(), agent="good")
    remember(good, FIVE)
    remember(good, FIVE_MORE)
    server.reset()
    server.misbehave("wrong_length", times=-1, task="process_batch")
    server.misbehave("wrong_length", times=-1, task="relation_batch")
    bad = open_mem(make_model(), agent="bad")
    remember(bad, FIVE)
    remember(bad, FIVE_MORE)
    assert nodes(bad) == nodes(good)
    assert links(bad).keys() == links(good).keys()
    assert {k: v[1] for k, v in links(bad).items()} == {k: v[1] for k, v in links(good).items()}
    assert server.count("process") == 10 and server.count("relation") == 25
    assert server.count("process_batch") == 2  # one attempt per remember, then single calls


def test_a_hung_server_is_cut_off_by_the_timeout(
    server: FakeLLM, make_model: Callable[..., HTTPModel]
) -> None:
    model = make_model(timeout=0.5)
    server.misbehave("hang", seconds=5)
    start = time.perf_counter()
    with pytest.raises(ModelError, match="within 0.5 s") as info:
        model.relation("张伟负责登录", "登录模块")
    assert time.perf_counter() - start < 1.2
    assert not isinstance(info.value, PermanentModelError)
    assert model.relation("张伟负责登录", "登录模块") == RELATION  # the pool recovers


def test_config_model_timeout_cuts_off_a_hung_server_and_other_agents_are_served(
    server: FakeLLM, data_dir: Path
) -> None:
    config = Config(model_timeout=0.5, max_retries=1, retry_initial_delay=0.2,
                    retry_max_delay=0.2, auto_compress=False)
    with (
        OllamaModel(MODEL, server.url) as model,
        MemorySystem(data_dir=data_dir, model=model, config=config) as system,
    ):
        assert model.timeout == 0.5 and not model.timeout_is_explicit
        a, b = system.agent("a"), system.agent("b")
        remember(b, ["the payment callback times out"])
        server.misbehave("hang", times=-1, task="process", seconds=10)
        start = time.perf_counter()
        a.remember(say("张伟负责 JWT 登录"))
        while server.count("process") < 2 and time.perf_counter() - start < 10:
            time.sleep(0.01)  # until a's request (after b's answered one) reaches the server
        asked = time.perf_counter()  # a's request hangs now; b waits for its cut-off at most
        assert "payment callback" in b.recall(["payment"], timeout=5)
        assert time.perf_counter() - asked < 3
        assert a.wait_idle(timeout=20)
        assert time.perf_counter() - start < 6  # two hung attempts of 10 s each, cut at 0.5 s
        process = model.usage()["by_task"]["process"]  # b's answered request, a's two cut off
        assert (process["requests"], process["failures"]) == (3, 2)
        assert 0.9 <= process["seconds"] < 3
        # SPEC §5.1 step 2: the text is kept, phrase and keywords from the built-in model.
        ((content, phrase, keywords),) = nodes(a)
        fallback = HeuristicModel().process(content)
        assert content == "user: 张伟负责 JWT 登录" and phrase == fallback.phrase
        assert keywords == sorted(set(fallback.keywords)) and a.failed_tasks() == []


def test_an_explicit_timeout_wins_over_config_model_timeout(
    server: FakeLLM, data_dir: Path
) -> None:
    config = Config(model_timeout=0.5, auto_compress=False)
    env = {"MEMORY_RDF_MODEL": f"openai:{MODEL}", "MEMORY_RDF_MODEL_URL": server.openai_url}
    with (
        OllamaModel(MODEL, server.url, timeout=7) as explicit,
        model_from_env({**env, "MEMORY_RDF_MODEL_TIMEOUT": "9"}) as from_env,
        model_from_env(env) as unset,
        OpenAIModel(MODEL, server.openai_url) as own,
    ):
        assert isinstance(from_env, HTTPModel) and isinstance(unset, HTTPModel)
        assert unset.timeout == 300  # until a manager gives it its Config's
        for model in (explicit, from_env, unset):
            with MemoryManager("agent", data_dir=data_dir / model.backend, config=config,
                               model=model):
                pass
        assert (explicit.timeout, from_env.timeout, unset.timeout) == (7, 9, 0.5)
        assert explicit.use_default_timeout(2) == 7
        with MemorySystem(data_dir=data_dir / "system", model=unset, config=Config()) as system:
            system.agent("other", config=Config(model_timeout=3))  # shares the system's model
            assert unset.timeout == 300
            MemoryManager("own", config=Config(model_timeout=4), model=own,
                          system=system).close()
            assert own.timeout == 4


def test_unreachable_server_is_transient() -> None:
    with FakeLLM() as s:
        url = s.url
    with OllamaModel(MODEL, url, timeout=2) as model:
        with pytest.raises(ModelError, match="cannot reach") as info:
            model.segment("user: hello")
        assert not isinstance(info.value, PermanentModelError)
        model.close()
        with pytest.raises(PermanentModelError, match="closed"):
            model.segment("user: hello")


def test_an_invalid_answer_is_asked_again_warmer(
    server: FakeLLM, make_model: Callable[..., HTTPModel]
) -> None:
    model = make_model()
    server.misbehave("garbage", times=1)
    with pytest.raises(ModelError, match="not JSON"):
        model.relation("a", "b")
    assert model.relation("a", "b") == RELATION
    assert model.relation("a", "b") == RELATION
    temps = [r.body["options"]["temperature"] for r in server.requests()]
    assert temps == [0.0, 0.3, 0.0]


# --------------------------------------------------------------------------- accounting


@pytest.mark.parametrize("backend", BACKENDS)
def test_token_accounting_matches_the_server(
    backend: str, server: FakeLLM, make_model: Callable[..., HTTPModel],
    open_mem: Callable[..., MemoryManager],
) -> None:
    model = make_model(backend)
    before = thread_usage()
    model.process("张伟负责 JWT 登录，下周三发布", 8)
    after = thread_usage()
    mem = open_mem(model)
    remember(mem, FIVE)
    server.misbehave("status", times=1, task="relation_batch", status=503)
    remember(mem, FIVE_MORE)
    usage = model.usage()
    prompt, completion = server.tokens()
    assert prompt > 0 and completion > 0
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (prompt, completion)
    assert usage["requests"] == server.count() and usage["failures"] == 1
    for task, counts in usage["by_task"].items():
        rs = server.requests(task)
        assert counts["requests"] == len(rs)
        assert counts["prompt_tokens"] == sum(r.prompt_tokens for r in rs)
        assert counts["completion_tokens"] == sum(r.completion_tokens for r in rs)
    first = server.requests()[0]
    assert (after[0] - before[0], after[1] - before[1], after[2] - before[2]) == (
        1, first.prompt_tokens, first.completion_tokens)


# --------------------------------------------------------------------------- answer rules


def test_segments_must_cover_the_text_allowing_pronoun_resolution() -> None:
    text = "user: 张伟负责登录模块。他下周三上线。\nassistant: 好的"
    resolved = {
        "segments": ["user: 张伟负责登录模块。", "user: 张伟下周三上线。", "assistant: 好的"]
    }
    assert check_segments(resolved, text) == resolved["segments"]
    en = "user: Zhang Wei owns the login module. He ships it on Wednesday."
    assert coverage_problem(en, "user: Zhang Wei owns the login module.\n"
                                "user: Zhang Wei ships the login module on Wednesday.") is None
    with pytest.raises(ModelError, match="do not cover"):
        check_segments({"segments": ["user: 张伟负责登录模块。"]}, text)
    with pytest.raises(ModelError, match="words for an input"):
        check_segments({"segments": [text * 3]}, text)
    with pytest.raises(ModelError, match="blank"):
        check_segments({"segments": [" ", ""]}, text)


def test_processed_answers_are_checked_and_repaired(
    server: FakeLLM, make_model: Callable[..., HTTPModel], answers: dict[str, dict[str, Any]],
    open_mem: Callable[..., MemoryManager],
) -> None:
    model = make_model()
    text = "user: the payment callback times out after thirty seconds in production"
    good = {"content": text, "phrase": " payment  callback。",
            "keywords": ["payment", " call  back", "Payment", "timeout", "production"]}
    answers["process"] = good
    assert model.process(text) == Processed(  # repaired: spaces, punctuation, duplicates
        text, "payment callback", ["payment", "call back", "timeout", "production"])
    sent = server.requests("process")[-1].schema["properties"]
    assert sent["phrase"]["maxLength"] == 20  # the rule a decoding server can enforce
    assert (sent["keywords"]["minItems"], sent["keywords"]["maxItems"]) == (1, 5)
    answers["process"] = {**good, "content": "payment callback timeout"}
    assert model.process(text, 20).content == "payment callback timeout"  # 24 <= 1.25 × 20
    failed = {
        "phrase must have at most 20 characters, got 25": {
            **good, "phrase": "payment callback timeouts"},
        "keywords must have at most 5 items": {**good, "keywords": list("abcdef")},
        "2 distinct keywords, need 3-5": {**good, "keywords": ["payment", "PAYMENT", "call"]},
        "not the text": {**good, "content": "something else entirely"},
        "the phrase is empty": {**good, "phrase": " 。"},
    }
    for message, item in failed.items():
        answers["process"] = item
        with pytest.raises(ModelError, match=message):
            model.process(text)
    answers["process"] = good
    with pytest.raises(ModelError, match="characters for a target of 10"):
        model.process(text, 10)
    # A very short text may have 1–2 keywords, never none.
    short = "assistant: 好的"
    answers["process"] = {"content": short, "phrase": "好的", "keywords": ["好的"]}
    assert model.process(short).keywords == ["好的"]
    answers["process"] = {"content": short, "phrase": "好的", "keywords": []}
    with pytest.raises(ModelError, match="at least 1 items"):
        model.process(short)
    assert model.usage()["invalid_answers"] == len(failed) + 2
    # Through the manager a phrase too long is a failed call: the built-in summary is used.
    answers["process"] = {**good, "phrase": "payment callback timeouts"}
    mem = open_mem(model)
    remember(mem, [text.removeprefix("user: ")])
    ((content, phrase, _),) = nodes(mem)
    assert (content, phrase) == (text, HeuristicModel().process(text).phrase)
    assert server.count("process") == len(failed) + 5 + 3  # 1 + max_retries attempts


def test_relation_names() -> None:
    assert check_relation(" 「涉及」。") == "涉及"
    assert check_relation("part of") == "part of"
    assert check_relation("无关") == "" and check_relation("None") == ""
    with pytest.raises(ModelError, match="not a relation name"):
        check_relation("The new memory elaborates on the focus memory's topic")


def test_fake_server_answers_follow_the_schema() -> None:
    p = fake_processed("user: 张伟负责 JWT 登录", 6)
    assert p["content"] == "user: " and len(p["keywords"]) >= 3


# --------------------------------------------------------------------------- environment


def test_model_from_env_parses_the_variables(server: FakeLLM) -> None:
    assert isinstance(model_from_env({}), HeuristicModel)
    assert isinstance(model_from_env({"MEMORY_RDF_MODEL": " Heuristic "}), HeuristicModel)
    with model_from_env({"MEMORY_RDF_MODEL": "ollama:qwen2.5:7b"}) as m:
        assert isinstance(m, OllamaModel)
        assert (m.model, m.base_url, m.timeout) == ("qwen2.5:7b", "http://localhost:11434", 300)
    with model_from_env({"MEMORY_RDF_MODEL": "openai:gpt-4o-mini"}) as m:
        assert isinstance(m, OpenAIModel) and m.base_url == "https://api.openai.com/v1"
    with FakeLLM(models=["qwen"], api_key="sk-env") as s:
        env = {"MEMORY_RDF_MODEL": "openai:qwen", "MEMORY_RDF_MODEL_URL": s.openai_url + "/",
               "OPENAI_API_KEY": "sk-env", "MEMORY_RDF_MODEL_TIMEOUT": "2.5"}
        with model_from_env(env) as m:
            assert m.timeout == 2.5 and m.relation("a", "b") == RELATION
        with (
            model_from_env({**env, "MEMORY_RDF_API_KEY": "sk-other"}) as m,
            pytest.raises(PermanentModelError),  # MEMORY_RDF_API_KEY wins
        ):
            m.relation("a", "b")
        env = {"MEMORY_RDF_MODEL": "ollama:qwen", "MEMORY_RDF_MODEL_URL": s.url}
        with model_from_env(env) as m:
            assert m.segment("user: hi") == ["user: hi"]


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"MEMORY_RDF_MODEL": "gpt:x"}, "MEMORY_RDF_MODEL"),
        ({"MEMORY_RDF_MODEL": "ollama:"}, "MEMORY_RDF_MODEL"),
        ({"MEMORY_RDF_MODEL": "openai"}, "MEMORY_RDF_MODEL"),
        ({"MEMORY_RDF_MODEL": "ollama:q", "MEMORY_RDF_MODEL_URL": "localhost:11434"},
         "MEMORY_RDF_MODEL_URL"),
        ({"MEMORY_RDF_MODEL": "ollama:q", "MEMORY_RDF_MODEL_TIMEOUT": "soon"},
         "MEMORY_RDF_MODEL_TIMEOUT"),
        ({"MEMORY_RDF_MODEL": "ollama:q", "MEMORY_RDF_MODEL_TIMEOUT": "0"},
         "MEMORY_RDF_MODEL_TIMEOUT"),
    ],
)
def test_model_from_env_rejects_bad_values(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable) as info:
        model_from_env(env)
    assert isinstance(info.value, ValueError)


def test_model_from_env_reads_the_environment_when_called(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORY_RDF_MODEL", "ollama:llama3.2")
    monkeypatch.setenv("MEMORY_RDF_MODEL_URL", "http://10.0.0.5:11434")
    with model_from_env() as m:
        assert isinstance(m, OllamaModel)
        assert (m.model, m.base_url) == ("llama3.2", "http://10.0.0.5:11434")
    monkeypatch.delenv("MEMORY_RDF_MODEL")
    assert isinstance(model_from_env(), HeuristicModel)


def test_constructor_checks() -> None:
    with pytest.raises(ValueError, match="base_url"):
        OllamaModel("q", "localhost:11434")
    with pytest.raises(ValueError, match="timeout"):
        OpenAIModel("q", "http://x/v1", timeout=0)
    with pytest.raises(ValueError, match="model"):
        OllamaModel(" ")
    with OpenAIModel("q", "http://x/v1", "sk-secret") as m:
        assert "sk-secret" not in repr(m)


def test_importing_the_package_does_not_import_httpx() -> None:
    code = "import sys, memory_rdf, memory_rdf.small_model; assert 'httpx' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
