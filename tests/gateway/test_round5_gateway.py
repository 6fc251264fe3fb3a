"""Round 5 of the hostile runs against the gateway (issue 67, items 1-10): each client is untrusted.
A bad request is refused to that client in one line (an OpenAI error object: 400, 409, 413) and
the others are served; a training run goes on. Every test runs the real server, and the official
`openai` client wherever the request is one it can send."""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import statistics
import threading
import time

import httpx
import pytest

openai = pytest.importorskip("openai")

from agentgym.integrations.gateway.app import GatewayConfig, RunningGateway  # noqa: E402
from agentgym.integrations.gateway.recorder import Recorder  # noqa: E402

LOOK = [{"role": "user", "content": "look"}]


def open_episode(gateway, **body) -> dict:
    r = httpx.post(gateway.url + "/episodes", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def client_for(base_url: str, **kwargs):
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=60, **kwargs)


def refused(response: httpx.Response, status: int, code: str | None = None) -> dict:
    """The response is the documented OpenAI error object with this status (and code)."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["message"] and error["type"] and "\n" not in error["message"]
    if code is not None:
        assert error["code"] == code
    return error


class GatedEngine:
    """The tiny policy, each engine call held until the test opens `gate` (a call kept sampling)."""

    def __init__(self, policy):
        self.policy, self.tokenizer, self.eos_ids = policy, policy.tokenizer, policy.eos_ids
        self.gate, self.entered = threading.Event(), threading.Event()

    def encode_prompt(self, messages):
        return self.policy.encode_prompt(messages)

    def generate_ids(self, prompt_ids, sampling=None):
        self.entered.set()
        assert self.gate.wait(30)
        return self.policy.generate_ids(prompt_ids, sampling)


def test_a_non_finite_reward_is_refused(gateway):
    """Round 5, item 1: a non-finite or overflowing reward (NaN, Infinity, 1e308) is refused with 400."""
    ep = open_episode(gateway, group="g")
    client_for(ep["base_url"]).chat.completions.create(model="tiny", messages=LOOK, max_tokens=3)
    url = gateway.url + f"/episodes/{ep['id']}/reward"
    for raw in (b'{"reward": NaN}', b'{"reward": Infinity}', b'{"reward": -Infinity}', b'{"reward": 1e308}',
                b'{"reward": 1, "step_rewards": [NaN]}', b'{"reward": 1, "step_rewards": [1e300]}'):
        refused(httpx.post(url, content=raw, headers={"content-type": "application/json"}), 400)
    record = httpx.get(gateway.url + f"/episodes/{ep['id']}")
    assert record.status_code == 200 and record.json()["closed"] is False  # still open, still readable
    assert httpx.post(url, json={"reward": 1.0, "step_rewards": [0.5]}).status_code == 200


def test_a_reward_posted_while_a_call_samples_leaves_the_closed_episode_intact(policy):
    """Round 5, item 2: a reward posted while the episode's call samples closes it without that call (409)."""
    engine = GatedEngine(policy)
    recorder = Recorder(engine, model_names=("tiny",), default_max_tokens=4)
    with RunningGateway(recorder, GatewayConfig(port=0)) as gateway:
        ep = open_episode(gateway, group="g")
        client = client_for(ep["base_url"])
        engine.gate.set()
        first = client.chat.completions.create(model="tiny", messages=LOOK)
        engine.gate.clear()
        engine.entered.clear()
        second = {}

        def call() -> None:
            messages = LOOK + [first.choices[0].message.model_dump(exclude_none=True),
                               {"role": "user", "content": "take key"}]
            try:
                client.chat.completions.create(model="tiny", messages=messages)
            except openai.APIStatusError as exc:
                second["error"] = exc

        thread = threading.Thread(target=call)
        thread.start()
        assert engine.entered.wait(30)  # the second call is sampling now
        closed = httpx.post(gateway.url + f"/episodes/{ep['id']}/reward", json={"reward": 1.0, "states": ["room"]})
        engine.gate.set()
        thread.join(30)
        assert closed.status_code == 200 and closed.json()["calls"] == 1
        assert second["error"].status_code == 409 and second["error"].body["code"] == "episode_closed"
        episode = recorder.episodes[ep["id"]]
        assert len(episode.calls) == 1  # the late call is not appended to the closed episode
        trajectory = recorder.trajectory(episode)  # what the trainer takes: one step, its state
        assert len(trajectory.steps) == 1 and trajectory.steps[0].anchor == "room"


@pytest.mark.parametrize("messages,extra,param", [
    ([{"role": "assistant", "content": "x", "tool_calls": [5]}, {"role": "user", "content": "look"}], {},
     "messages[0].tool_calls[0]"),
    ([{"role": "assistant", "content": "x", "tool_calls": [{"function": "f"}]}], {}, "messages[0].tool_calls[0]"),
    (LOOK, {"stream_options": "x"}, "stream_options"),
    (LOOK, {"tool_choice": {"type": "function", "function": "get_weather"},
            "tools": [{"type": "function", "function": {"name": "get_weather"}}]}, "tool_choice"),
    (LOOK, {"logprobs": "yes"}, "logprobs"),
])
def test_a_wrong_typed_field_gets_400(gateway, messages, extra, param):
    """Round 5, item 3: a chat field of the wrong type gets the documented 400, not a plain-text 500."""
    ep = open_episode(gateway, group="g")
    client = client_for(ep["base_url"])
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="tiny", messages=messages, max_tokens=3, extra_body=extra)
    assert bad.value.body["param"] == param
    assert client.chat.completions.create(model="tiny", messages=LOOK, max_tokens=3).choices  # served still


def test_wrong_typed_episode_fields_and_deep_json_get_400_and_never_reach_training(gateway):
    """Round 5, item 3: wrong-typed episode fields and 100k-deep JSON get 400; metadata never reaches the trainer's keys."""
    url = gateway.url + "/episodes"
    for body in ({"metadata": "a string"}, {"metadata": [1]}, {"group": ["a"]}, {"task_id": {"id": 1}},
                 {"group": "g" * 1000}):
        refused(httpx.post(url, json=body), 400)
    deep = b'{"model": "tiny", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    refused(httpx.post(gateway.url + "/v1/chat/completions", content=deep,
                       headers={"content-type": "application/json"}), 400)
    # the trainer sums metadata["splits"] and reads other keys of its own: the program's metadata is kept apart
    ep = open_episode(gateway, group="g", metadata={"splits": "many", "retokenized_turns": "x", "dropped": True})
    client_for(ep["base_url"]).chat.completions.create(model="tiny", messages=LOOK, max_tokens=3)
    assert httpx.post(url + f"/{ep['id']}/reward", json={"reward": 0.5}).status_code == 200
    trajectory = gateway.recorder.trajectory(gateway.recorder.episodes[ep["id"]])
    assert trajectory.metadata["splits"] == 0 and "dropped" not in trajectory.metadata
    assert trajectory.metadata["client"]["splits"] == "many"


def test_groups_straddling_the_batch_boundary_are_held_for_the_next_batch(gateway):
    """Round 5, item 4: a group whose episodes straddle the batch boundary is held whole for the next batch."""
    from agentgym.integrations.gateway.training import GatewayBatches

    recorder = gateway.recorder
    batches = GatewayBatches(recorder, episodes_per_iter=2, seed=0, min_group=2, idle_s=2.0)
    episodes = {name: open_episode(gateway, group=name[0]) for name in ("A1", "A2", "B1", "B2", "C1")}
    with concurrent.futures.ThreadPoolExecutor(5) as pool:  # one turn of five episodes: one batch
        list(pool.map(lambda ep: client_for(ep["base_url"]).chat.completions.create(
            model="tiny", messages=LOOK, max_tokens=2), episodes.values()))

    def close(name: str) -> None:
        assert httpx.post(gateway.url + f"/episodes/{episodes[name]['id']}/reward", json={"reward": 1.0}).status_code == 200

    for name in ("A1", "B1", "B2"):  # A2 still plays when the first batch is cut
        close(name)
    first = batches.get(0)
    batches.release()
    assert sorted(t.group_id for t in first.trajectories) == ["B", "B"]
    close("C1")  # C's only episode: no episode to compare it with
    close("A2")
    second = batches.get(1)
    batches.release()
    assert sorted(t.group_id for t in second.trajectories) == ["A", "A"]
    deadline = time.monotonic() + 10
    while recorder.stats["dropped_lone_episodes"] < 1 and time.monotonic() < deadline:  # dropped after idle_s
        with recorder.changed:
            batches._whole_groups()
        time.sleep(0.1)
    assert recorder.stats["dropped_lone_episodes"] == 1 and batches.queue == []


def test_a_group_that_keeps_playing_is_held_at_most_max_hold_s(gateway):
    """Round 5, item 4: a group name a program keeps opening episodes under is held at most max_hold_s, not forever."""
    from agentgym.integrations.gateway.training import GatewayBatches

    batches = GatewayBatches(gateway.recorder, episodes_per_iter=2, seed=0, min_group=2, idle_s=60, max_hold_s=0.5)
    done = [open_episode(gateway, group="task") for _ in range(2)]
    open_episode(gateway, group="task")  # still playing, within idle_s
    for ep in done:
        assert httpx.post(gateway.url + f"/episodes/{ep['id']}/reward", json={"reward": 1.0}).status_code == 200
    t0 = time.monotonic()
    batch = batches.get(0)
    batches.release()
    assert [t.group_id for t in batch.trajectories] == ["task", "task"] and 0.4 < time.monotonic() - t0 < 5


def test_a_lone_surrogate_fails_only_its_own_request(gateway):
    """Round 5, item 5: a message holding a lone surrogate is refused with 400; the requests batched with it are served."""
    honest = [open_episode(gateway, group="h") for _ in range(5)]
    hostile = open_episode(gateway, group="x")
    raw = b'{"model": "tiny", "max_tokens": 3, "messages": [{"role": "user", "content": "look \\ud800"}]}'

    def send(k: int):
        if k == len(honest):
            return httpx.post(hostile["base_url"] + "/chat/completions", content=raw,
                              headers={"content-type": "application/json"}, timeout=60)
        return client_for(honest[k]["base_url"]).chat.completions.create(model="tiny", messages=LOOK, max_tokens=3)

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(send, range(6)))
    refused(results[-1], 400, "invalid_text")
    assert all(r.choices[0].finish_reason in ("stop", "length") for r in results[:-1])
    assert gateway.recorder.stats["engine_errors"] == 0


def test_a_large_body_is_refused_with_413_before_it_is_read(policy):
    """Round 5, item 6: a body over max_body_bytes is refused with 413, declared or streamed, and /health stays prompt."""
    recorder = Recorder(policy, model_names=("tiny",), default_max_tokens=3)
    with RunningGateway(recorder, GatewayConfig(port=0, max_body_bytes=64 * 1024)) as gateway:
        client = client_for(gateway.url + "/v1")
        with pytest.raises(openai.APIStatusError) as big:
            client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "look " * 40_000}])
        assert big.value.status_code == 413 and big.value.body["code"] == "request_too_large"

        def chunks():  # no Content-Length: bounded as it is read
            yield b'{"model": "tiny", "messages": [{"role": "user", "content": "'
            for _ in range(100):
                yield b"look " * 400
            yield b'"}]}'

        refused(httpx.post(gateway.url + "/v1/chat/completions", content=chunks(),
                           headers={"content-type": "application/json"}), 413, "request_too_large")
        t0 = time.monotonic()
        assert httpx.get(gateway.url + "/health").status_code == 200 and time.monotonic() - t0 < 1
        assert client.chat.completions.create(model="tiny", messages=LOOK).choices
    assert GatewayConfig().max_body_bytes <= 8 * 2**20  # the default bounds a 16 MB body too


def test_an_idle_episode_and_a_trickle_do_not_hold_honest_calls(policy):
    """Round 5, item 7: an idle open episode plus a trickle of 1-token requests holds an honest call at most max_wait_s."""
    recorder = Recorder(policy, model_names=("tiny",), default_max_tokens=3)
    with RunningGateway(recorder, GatewayConfig(port=0)) as gateway:  # the defaults: gather 0.25 s, idle 5 s
        stop = threading.Event()

        def trickle() -> None:  # a 1-token request every 0.15 s, each sent without waiting for the last
            with httpx.Client(timeout=60) as http, concurrent.futures.ThreadPoolExecutor(64) as pool:
                for k in itertools.count():
                    if stop.is_set():
                        break
                    if k % 10 == 0:  # an open episode never called: waited for up to idle_s, so one a second
                        open_episode(gateway, group="idle")
                    pool.submit(http.post, gateway.url + "/v1/chat/completions",
                                json={"model": "tiny", "messages": LOOK, "max_tokens": 1})
                    time.sleep(0.15)

        attacker = threading.Thread(target=trickle)
        attacker.start()
        try:
            time.sleep(0.3)
            client = client_for(open_episode(gateway, group="honest")["base_url"])
            seconds = []
            for _ in range(3):
                t0 = time.monotonic()
                client.chat.completions.create(model="tiny", messages=LOOK, max_tokens=3)
                seconds.append(time.monotonic() - t0)
        finally:
            stop.set()
            attacker.join(30)
        assert statistics.median(seconds) < 2.5, seconds  # before: ~5 s per call


def test_the_context_check_counts_tokens_not_characters(gateway):
    """Round 5, item 8: the context check counts tokens: 150 emoji (600 tokens) on a 512-token context get 400."""
    client = client_for(open_episode(gateway, group="g")["base_url"])
    text = "\N{GRINNING FACE}" * 150
    assert len(gateway.recorder.http_tokenizer(text, add_special_tokens=False)["input_ids"]) > 512
    with pytest.raises(openai.BadRequestError) as long:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": text}], max_tokens=4)
    assert long.value.body["code"] == "context_length_exceeded"


def test_a_held_out_task_id_is_refused(policy):
    """Round 5, item 9: an episode naming a held-out task id is refused with 400 (heldout_task)."""
    from agentgym.registration import get_task_space
    from agentgym.tasks.validation import heldout_keys

    space = get_task_space("agentgym/Household-v0")
    recorder = Recorder(policy, model_names=("tiny",), heldout_tasks=frozenset(heldout_keys(space)))
    with RunningGateway(recorder, GatewayConfig(port=0)) as gateway:
        heldout, train = space.split("heldout")[0].task_id, space.split("train")[0].task_id
        refused(httpx.post(gateway.url + "/episodes", json={"task_id": heldout}), 400, "heldout_task")
        assert httpx.post(gateway.url + "/episodes", json={"task_id": train}).status_code == 200
        assert recorder.stats["refused_heldout"] == 1


def test_a_foreign_host_header_is_refused(gateway):
    """Round 5, item 10: a request whose Host names another site (DNS rebinding) is refused with 400 (invalid_host)."""
    port = gateway.url.rsplit(":", 1)[1]
    for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.attacker.example:{port}"):
        client = client_for(gateway.url + "/v1", default_headers={"Host": host})
        with pytest.raises(openai.BadRequestError) as bad:
            client.chat.completions.create(model="tiny", messages=LOOK, max_tokens=3)
        assert bad.value.body["code"] == "invalid_host"
        refused(httpx.get(gateway.url + "/metrics", headers={"Host": host}), 400, "invalid_host")
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
        assert httpx.get(gateway.url + "/health", headers={"Host": host}).status_code == 200


def hostile_client(url: str, context: int, report: dict) -> None:
    """Items 1-8 from one client, while honest clients train: what each request got back."""
    got = report.setdefault("statuses", [])
    http = httpx.Client(timeout=120)

    def post(path: str, **kwargs) -> int:
        try:
            status = http.post(url + path, **kwargs).status_code
        except httpx.TransportError:  # a server may close a connection whose body it refused unread
            status = -1
        got.append(status)
        return status

    def episode(group: str, **body) -> dict:
        return http.post(url + "/episodes", json={"group": group, **body}).json()

    chat = {"model": "agentgym", "messages": LOOK, "max_tokens": 2}
    raw = {"headers": {"content-type": "application/json"}}
    bad = episode("nan")
    post(f"/episodes/{bad['id']}/chat", json=chat)  # 404: a wrong path is refused too
    post(f"/episodes/{bad['id']}/v1/chat/completions", json=chat)
    for reward in (b"NaN", b"Infinity", b"1e308"):  # item 1
        post(f"/episodes/{bad['id']}/reward", content=b'{"reward": ' + reward + b"}", **raw)
    for k in range(2):  # item 2: a reward racing the episode's own call (a group of two, so it may be trained on)
        ep = episode("race")
        post(f"/episodes/{ep['id']}/v1/chat/completions", json=chat)
        racing = threading.Thread(target=post, args=(f"/episodes/{ep['id']}/v1/chat/completions",),
                                  kwargs={"json": {**chat, "messages": LOOK + [{"role": "user", "content": "again"}]}})
        racing.start()
        if post(f"/episodes/{ep['id']}/reward", json={"reward": float(k), "states": ["s"]}) == 400:
            post(f"/episodes/{ep['id']}/reward", json={"reward": float(k)})  # the racing call came first: 2 calls
        racing.join()
    for k in range(2):  # item 3: metadata the trainer would read as its own, in a group that is trained on
        ep = episode("meta", metadata={"splits": "x", "retokenized_turns": "y"})
        post(f"/episodes/{ep['id']}/v1/chat/completions", json=chat)
        post(f"/episodes/{ep['id']}/reward", json={"reward": float(k)})
    post("/episodes", json={"metadata": "a string"})
    post("/v1/chat/completions", json={**chat, "stream_options": "x"})
    post("/v1/chat/completions", json={**chat, "messages": [{"role": "assistant", "content": "", "tool_calls": [5]}]})
    post("/v1/chat/completions", content=b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", **raw)
    straddle = [episode("straddle") for _ in range(2)]  # item 4: one closed, one left open
    post(f"/episodes/{straddle[0]['id']}/v1/chat/completions", json=chat)
    post(f"/episodes/{straddle[0]['id']}/reward", json={"reward": 1.0})
    post("/v1/chat/completions", content=b'{"model": "agentgym", "messages": [{"role": "user", "content": "\\ud800"}]}',
         **raw)  # item 5
    post("/v1/chat/completions", content=b"{" + b" " * (5 * 2**20) + b"}", **raw)  # item 6: over 4 MiB
    episode("idle")  # item 7: an idle open episode and a trickle of 1-token requests
    for _ in range(10):
        post("/v1/chat/completions", json={**chat, "max_tokens": 1})
        time.sleep(0.2)
    emoji = "\N{GRINNING FACE}" * (context * 3 // 4)  # item 8: fewer characters than the context, 3x the tokens
    post("/v1/chat/completions", json={**chat, "messages": [{"role": "user", "content": emoji}]})
    http.close()


def honest_clients(url: str, groups: range, statuses: list) -> None:
    """Groups of two episodes played at once, two calls each, with their states and validity."""
    def play(ep: dict, k: int) -> None:
        client = client_for(ep["base_url"])
        messages = list(LOOK)
        for turn in range(2):
            reply = client.chat.completions.create(model="agentgym", messages=messages)
            messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "look"}]
        r = httpx.post(url + f"/episodes/{ep['id']}/reward", timeout=120, json={
            "reward": float(k), "step_rewards": [0.0, float(k)], "states": ["a", "b"], "valid": [True, True]})
        statuses.append(r.status_code)

    for g in groups:
        pair = [httpx.post(url + "/episodes", json={"group": f"task-{g}"}).json() for _ in range(2)]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            list(pool.map(play, pair, range(2)))


def test_a_training_run_survives_a_hostile_client(tiny_model_dir, tmp_path, gateway_training):
    """Round 5, items 1-8 together: a gateway training run survives a hostile client beside honest ones."""
    from agentgym.trainers.config import load_config

    cfg = load_config("household-tiny", [f"policy.model={tiny_model_dir}", "tiny.build=false", "sft.enabled=false",
                                          "iterations=3", f"run_dir={tmp_path / 'run'}", "torch_threads=1",
                                          "rollout.max_new_tokens=4", "eval.num_tasks=2", "eval.episodes_per_task=1"])
    thread, url, result, failed = gateway_training(cfg, episodes_per_iter=4, log=lambda line: None)
    report, honest = {}, []
    attacker = threading.Thread(target=hostile_client, args=(url, 4096, report))
    attacker.start()
    honest_clients(url, range(3), honest)
    attacker.join(120)
    honest_clients(url, range(3, 4), honest)  # the last batch: 4 honest and 2 hostile groups of 2 make 3
    thread.join(120)
    assert not thread.is_alive() and not failed, failed
    assert honest == [200] * 8  # every honest episode was served and closed
    run = tmp_path / "run"
    assert (run / "final_model" / "config.json").is_file() and (run / "summary.json").is_file()
    last = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()
            if "gateway/refused_400" in line][-1]  # the last iteration's
    refusals = {s: report["statuses"].count(s) for s in (400, 404, 409, 413)}
    assert refusals[400] >= 9 and last["gateway/refused_400"] >= 9
    assert last["gateway/refused_413"] >= 1 and last.get("gateway/engine_errors", 0) == 0
    assert report["statuses"].count(500) == 0 and refusals[413] + report["statuses"].count(-1) >= 1
    assert result["heldout_success_before"] is not None and result["iterations"] == 3


def test_gateway_training_without_the_evaluation_before(tiny_model_dir, tmp_path, gateway_training):
    """eval.before=false: the gateway serves at once and the summary has the final evaluation alone."""
    from agentgym.trainers.config import load_config

    cfg = load_config("household-tiny", [f"policy.model={tiny_model_dir}", "tiny.build=false", "sft.enabled=false",
                                          "iterations=1", f"run_dir={tmp_path / 'run'}", "torch_threads=1",
                                          "rollout.max_new_tokens=4", "eval.num_tasks=2", "eval.before=false"])
    thread, url, result, failed = gateway_training(cfg, episodes_per_iter=4, log=lambda line: None)
    honest_clients(url, range(2), [])
    thread.join(120)
    assert not thread.is_alive() and not failed, failed
    assert [e["iteration"] for e in result["evals"]] == [1]
    assert result["heldout_success_before"] is None and result["heldout_gain"] is None
