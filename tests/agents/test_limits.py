"""The limiter of a server (cir.agents.limits) on a clock that moves only when slept on, the
shared connection pool, and the LLM agent's refusals (429/503) against its patience."""

from __future__ import annotations

import threading

import pytest
from support.fake_openai import FakeOpenAI, Reply

from cir.agents.limits import Limiter, RequestLimits, shared_limiter
from cir.agents.llm import LLMAgent
from cir.agents.pool import shared_client
from cir.agents.usage import usage_of
from cir.families import make_agent
from cir.families.alfworld.prompts import PROMPT as ALFWORLD_PROMPT  # noqa: E402
from cir.util.errors import CirError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


def limiter(clock: Clock, **kw) -> Limiter:
    return Limiter(clock=clock, sleep=clock.sleep, **kw)


def test_rpm_spaces_requests_evenly():
    clock = Clock()
    lim = limiter(clock, rpm=120)  # one request every 0.5 s
    starts = []
    for _ in range(5):
        lim.release(lim.acquire())
        starts.append(clock.now)
    assert [round(b - a, 6) for a, b in zip(starts, starts[1:], strict=False)] == [0.5] * 4
    assert lim.stats()["requests"] == 5


def test_tpm_spaces_requests_by_their_tokens_and_corrects_by_their_usage():
    clock = Clock()
    lim = limiter(clock, tpm=6000)  # 100 tokens a second
    lim.release(lim.acquire(200), tokens=50)  # estimated 200, cost 50: the next may come 1.5 s sooner
    t0 = clock.now
    lim.release(lim.acquire(100))
    assert round(clock.now - t0, 6) == 0.5
    lim.acquire(10)
    assert round(clock.now - t0, 6) == 1.5  # 100 tokens after the last start


def test_a_refusal_halves_the_window_once_per_round_and_success_grows_it_back():
    clock = Clock()
    lim = limiter(clock, concurrency=16)
    tickets = [lim.acquire() for _ in range(16)]
    lim.release(tickets[0], refused=True)
    assert lim.window == 8
    for t in tickets[1:6]:  # refusals of requests sent before the halving: the same signal
        lim.release(t, refused=True)
    assert lim.window == 8 and lim.stats()["shrinks"] == 1
    for t in tickets[6:]:
        lim.release(t)
    late = [lim.acquire() for _ in range(6)]
    lim.release(late[0], refused=True)  # sent after the halving: a new signal, 6 in flight
    assert lim.window == 3 and lim.stats()["shrinks"] == 2
    for t in late[1:]:
        lim.release(t)
    for _ in range(200):
        lim.release(lim.acquire())
    assert lim.window == 16  # back, and no further
    assert lim.stats()["window_min"] == 3 and lim.stats()["refusals"] == 7


def test_the_window_bounds_the_requests_in_flight_across_threads():
    lim = Limiter(concurrency=3)
    peak, now, lock = [0], [0], threading.Lock()
    full = threading.Event()  # three in flight: from then on each request ends at once

    def request():
        ticket = lim.acquire()
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
            if now[0] == 3:
                full.set()
        full.wait(300)  # each of the first three waits for the others, however slowly threads start
        with lock:
            now[0] -= 1
        lim.release(ticket)

    threads = [threading.Thread(target=request) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 3 and lim.stats()["peak_in_flight"] == 3


def test_retry_after_pauses_every_thread():
    clock = Clock()
    lim = limiter(clock)
    a, b = lim.acquire(), lim.acquire()
    lim.release(a, refused=True, wait=2.0)
    lim.release(b)
    lim.acquire()  # another thread's next request waits for the pause too
    assert clock.sleeps == [2.0]
    assert lim.stats()["pauses"] == 1 and lim.stats()["paused_s"] == 2.0


def test_limits_are_checked_and_shared_out_to_processes():
    with pytest.raises(CirError, match="rpm 0"):
        RequestLimits(rpm=0)
    with pytest.raises(CirError, match="concurrency 0"):
        RequestLimits(concurrency=0)
    with pytest.raises(CirError, match="request_timeout -1: expected seconds > 0"):
        RequestLimits(timeout=-1)
    with pytest.raises(CirError, match="retries -1"):
        RequestLimits(retries=-1)
    share = RequestLimits(concurrency=128, rpm=600, tpm=1e6).share(3)
    assert (share.concurrency, share.rpm, round(share.tpm)) == (43, 200, 333333)
    assert RequestLimits(rpm=60).share(1) == RequestLimits(rpm=60)


def test_agents_of_a_process_share_one_limiter_per_server_and_one_pool():
    limits = RequestLimits(concurrency=4, rpm=600)
    a = make_agent("openai:m", base_url="http://127.0.0.1:9", limits=limits)
    b = make_agent("openai:m", base_url="http://127.0.0.1:9/v1/", limits=limits)
    other = make_agent("openai:m", base_url="http://127.0.0.1:10/v1", limits=limits)
    assert a.limiter is b.limiter is shared_limiter("http://127.0.0.1:9/v1", limits)
    assert other.limiter is not a.limiter
    assert (a.timeout, a.max_retries, a.patience) == (120.0, 4, 600.0)
    assert shared_client() is shared_client()


def test_a_pool_keeps_connections_alive_with_nagle_off():
    context = [{"role": "user", "content": "You are in a room.\n\nYour task is to: find a mug."}]
    with FakeOpenAI([Reply(text="look")]) as server:
        agents = [LLMAgent("m", server.base_url, mode="completion", prompt=ALFWORLD_PROMPT) for _ in range(3)]
        for i in range(20):
            agents[i % 3].act(context + [{"role": "assistant", "content": "look"},
                                         {"role": "user", "content": f"step {i}"}])
    assert server.count == 20 and server.connections_opened == 1
    assert server.nodelay == [True]


def test_a_refusal_that_persists_slows_the_run_until_the_patience_says_so():
    clock = Clock()
    context = [{"role": "user", "content": "You are in a room.\n\nYour task is to: find a mug."}]
    with FakeOpenAI([Reply(status=429, headers={"Retry-After": "30"})]) as server:
        agent = LLMAgent("m", server.base_url, mode="completion", max_retries=0, patience=100,
                         limiter=limiter(clock), prompt=ALFWORLD_PROMPT)
        with pytest.raises(CirError) as err:
            agent.act(context)
    message = str(err.value)
    assert "HTTP 429" in message and "refused for" in message and "patience of 100 s" in message
    assert "lower the request rate" in message
    assert server.count == 4 and clock.sleeps == [30.0, 30.0, 30.0]  # waited, not counted as faults
    assert agent.stats()["refusals"] == 4 and agent.stats()["retries"] == 3


def test_503_is_a_refusal_and_500_a_fault():
    clock = Clock()
    script = [Reply(status=503), Reply(status=503), Reply(status=500), Reply(text="look")]
    context = [{"role": "user", "content": "You are in a room.\n\nYour task is to: find a mug."}]
    with FakeOpenAI(script) as server:
        agent = LLMAgent("m", server.base_url, mode="completion", max_retries=1, backoff=0.5,
                         limiter=limiter(clock), prompt=ALFWORLD_PROMPT)
        agent._sleep = clock.sleep
        assert agent.act(context) == "look"
    assert clock.sleeps == [0.5, 1.0, 2.0]  # backoff by attempt: pauses, then the fault's own wait
    assert agent.stats()["refusals"] == 2 and agent.stats()["retries"] == 3


@pytest.mark.parametrize(("answer", "usage"), [
    ({"usage": {"prompt_tokens": 10, "completion_tokens": 2}}, {"prompt_tokens": 10, "completion_tokens": 2}),
    ({"usage": {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 8}}},
     {"prompt_tokens": 10, "completion_tokens": 2, "cached_prompt_tokens": 8}),
    ({"usage": {"prompt_tokens": 10, "completion_tokens": 2}, "timings": {"cache_n": 7}},  # llama-server
     {"prompt_tokens": 10, "completion_tokens": 2, "cached_prompt_tokens": 7}),
    ({"usage": {"prompt_tokens": "10", "completion_tokens": 2}}, None),
    ({"usage": None}, None),
    ({}, None),
])
def test_usage_is_read_from_what_each_server_sends(answer, usage):
    assert usage_of(answer) == usage
