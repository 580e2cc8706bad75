"""The reply cache (cir.agents.cache): one log per process, read back by every process; any
damage reads as a miss; a key asked by two processes at once is asked once; folders of the
earlier layout (one file a reply) are still read."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import pickle
import threading
import time
from pathlib import Path

import pytest
from support.replies import cached_lines, folder_bytes, logs

import cir.agents.cache as cache_module
from cir.agents.cache import ResponseCache, request_key
from cir.util.errors import CirError

KEYS = [request_key("chat", {"i": i}) for i in range(6)]


def test_replies_are_lines_of_one_log_per_process_read_back_by_a_new_cache(tmp_path: Path, monkeypatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    cache = ResponseCache(tmp_path)
    for i, key in enumerate(KEYS):
        cache.put(key, {"text": f"look {i}", "usage": {"prompt_tokens": i}})
    assert synced == []  # a reply lost in a power cut is asked again: no fsync
    [log] = logs(tmp_path)
    assert log.name == f"replies-{log.name.split('-')[1]}-{os.getpid()}.jsonl"
    lines = log.read_text().splitlines()
    assert [json.loads(line)["key"] for line in lines] == KEYS
    fresh = ResponseCache(tmp_path)
    assert [fresh.get(k)["text"] for k in KEYS] == [f"look {i}" for i in range(6)]
    assert (fresh.hits_disk, fresh.hits_memory, len(fresh)) == (6, 0, 6)
    fresh.get(KEYS[0])
    assert fresh.hits_memory == 1
    assert ResponseCache(tmp_path).get(request_key("chat", {"other": 1})) is None


def test_any_damage_to_a_line_reads_as_a_miss_and_the_next_answer_replaces_it(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    for i, key in enumerate(KEYS):
        cache.put(key, {"text": f"look {i}"})
    [log] = logs(tmp_path)
    lines = log.read_bytes().split(b"\n")[:-1]
    lines[0] = lines[0][:40]  # cut short
    lines[1] = lines[1].replace(b"look 1", b"\xff\xfe 1")  # not UTF-8
    lines[2] = lines[2].replace(b"look 2", b"")  # no answer
    lines[3] = lines[3].replace(KEYS[3][:8].encode(), b"00000000")  # another key's line
    lines[4] = lines[4][:-1]  # not JSON
    log.write_bytes(b"\n".join(lines) + b"\n")
    fresh = ResponseCache(tmp_path)
    assert [fresh.get(k) for k in KEYS[:5]] == [None] * 5
    assert fresh.get(KEYS[5]) == {"text": "look 5"}
    fresh.put(KEYS[0], {"text": "again"})
    assert ResponseCache(tmp_path).get(KEYS[0]) == {"text": "again"}


def test_a_cut_last_line_is_a_miss_and_the_next_writer_of_the_log_starts_a_new_line(tmp_path: Path) -> None:
    # a process killed in the middle of a write left half a line; a later process with the
    # same pid (so the same log) appends after it
    host = cache_module.socket.gethostname()
    log = tmp_path / f"replies-{host}-{os.getpid()}.jsonl"
    log.write_text(f'{{"key": "{KEYS[0]}", "record": {{"text": "lo')
    cache = ResponseCache(tmp_path)
    assert cache.get(KEYS[0]) is None
    cache.put(KEYS[1], {"text": "look"})
    assert log.read_text().count("\n") == 2
    fresh = ResponseCache(tmp_path)
    assert (fresh.get(KEYS[0]), fresh.get(KEYS[1])) == (None, {"text": "look"})


def test_a_line_being_written_is_not_read_until_it_ends(tmp_path: Path) -> None:
    writer = ResponseCache(tmp_path)
    writer.put(KEYS[0], {"text": "look"})
    [log] = logs(tmp_path)
    reader = ResponseCache(tmp_path)
    assert reader.get(KEYS[0]) == {"text": "look"}
    line = f'{{"key": "{KEYS[1]}", "record": {{"text": "inventory"}}}}\n'.encode()
    with open(log, "ab") as f:  # another process, halfway through its write
        f.write(line[:30])
    assert reader.stored(KEYS[1]) is None
    with open(log, "ab") as f:
        f.write(line[30:])
    assert reader.stored(KEYS[1]) == {"text": "inventory"}


def test_a_file_for_a_folder_or_a_missing_fallback_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(CirError, match="cache folder .*f: exists but is not a folder"):
        ResponseCache(tmp_path / "f")
    with pytest.raises(CirError, match="cache folder .*gone: not found"):
        ResponseCache(tmp_path / "c", fallback=[tmp_path / "gone"])


def test_a_full_disk_names_the_log_and_the_next_reply_starts_a_new_line(tmp_path: Path, monkeypatch) -> None:
    cache = ResponseCache(tmp_path)
    cache.put(KEYS[0], {"text": "look"})
    real_write = os.write

    def half_then_full(fd, data):
        monkeypatch.setattr(os, "write", full)
        return real_write(fd, bytes(data[:20]))

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(CirError, match=r"replies-.*\.jsonl: cannot write \(No space left on device\)"):
        cache.put(KEYS[1], {"text": "inventory"})
    monkeypatch.setattr(os, "write", real_write)
    cache.put(KEYS[2], {"text": "go to desk 1"})
    fresh = ResponseCache(tmp_path)
    assert [fresh.get(k) for k in KEYS[:3]] == [{"text": "look"}, None, {"text": "go to desk 1"}]


def test_a_folder_of_the_earlier_layout_is_read_as_own_or_as_fallback(tmp_path: Path) -> None:
    old = tmp_path / "old"
    for i, key in enumerate(KEYS[:3]):
        (old / key[:2]).mkdir(parents=True, exist_ok=True)
        (old / key[:2] / f"{key}.json").write_text(json.dumps({"text": f"look {i}"}, indent=1))
    (old / KEYS[2][:2] / f"{KEYS[2]}.json").write_text('{"text": ""}')  # an empty answer: a miss
    own = ResponseCache(old)
    assert [own.get(k) for k in KEYS[:3]] == [{"text": "look 0"}, {"text": "look 1"}, None]
    own.put(KEYS[2], {"text": "again"})
    assert ResponseCache(old).get(KEYS[2]) == {"text": "again"} and len(ResponseCache(old)) == 3
    before = folder_bytes(old)
    new = ResponseCache(tmp_path / "new", fallback=[old])
    assert new.get(KEYS[1]) == {"text": "look 1"} and new.hits_disk == 1
    assert folder_bytes(old) == before
    assert ResponseCache(tmp_path / "new").get(KEYS[1]) == {"text": "look 1"}  # copied


def test_a_pickled_cache_leaves_its_memory_behind_and_reads_the_folder(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    cache.put(KEYS[0], {"text": "look"})
    clone = pickle.loads(pickle.dumps(cache))
    assert clone._memory == {} and clone.get(KEYS[0]) == {"text": "look"} and clone.hits_disk == 1
    in_memory = ResponseCache()
    in_memory.put(KEYS[0], {"text": "look"})
    assert pickle.loads(pickle.dumps(in_memory)).get(KEYS[0]) == {"text": "look"}


def test_a_reply_stored_by_another_cache_is_found_after_asking(tmp_path: Path) -> None:
    # what a process sees after waiting on the lock: the other one's reply, read from its log
    first, second = ResponseCache(tmp_path), ResponseCache(tmp_path)
    assert second.get(KEYS[0]) is None
    with first.asking(KEYS[0]):
        first.put(KEYS[0], {"text": "look"})
    with second.asking(KEYS[0]):
        assert second.stored(KEYS[0]) == {"text": "look"}


def test_threads_of_two_caches_on_one_folder_ask_one_at_a_time(tmp_path: Path) -> None:
    caches = [ResponseCache(tmp_path), ResponseCache(tmp_path)]
    asked: list[int] = []
    inside = threading.Semaphore(1)

    def ask(cache: ResponseCache) -> None:
        with cache.asking(KEYS[0]):
            assert inside.acquire(blocking=False), "two threads asking at once"
            if cache.stored(KEYS[0]) is None:
                asked.append(1)
                time.sleep(0.02)
                cache.put(KEYS[0], {"text": "look"})
            inside.release()

    threads = [threading.Thread(target=ask, args=(caches[i % 2],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert asked == [1] and not cache_module._Folder.of(tmp_path)._asking  # no waiting entry left


def test_a_lock_that_looks_like_a_deadlock_to_the_kernel_is_taken_again(tmp_path: Path, monkeypatch) -> None:
    calls: list[int] = []
    real = cache_module.fcntl.lockf

    def once_deadlock(fd, cmd, *args):
        calls.append(cmd)
        if len(calls) == 1:
            raise OSError(errno.EDEADLK, "Resource deadlock avoided")
        return real(fd, cmd, *args)

    monkeypatch.setattr(cache_module.fcntl, "lockf", once_deadlock)
    with ResponseCache(tmp_path).asking(KEYS[0]):
        pass
    assert len(calls) == 3  # refused, taken, released


def _ask_all(args: tuple[str, int]) -> int:
    """One process's share of the race: every key, asked only when no one has stored it."""
    root, worker = args
    cache = ResponseCache(root)
    asked = 0
    for i in range(30):
        key = request_key("completion", {"i": i})
        if cache.get(key) is not None:
            continue
        with cache.asking(key):
            if cache.stored(key) is None:
                asked += 1
                time.sleep(0.002)  # the request
                cache.put(key, {"text": f"reply {i}", "writer": worker})
    return asked


def test_processes_asking_the_same_keys_at_once_ask_each_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        asked = pool.map(_ask_all, [(str(tmp_path), w) for w in range(4)])
    assert sum(asked) == 30, asked
    lines = cached_lines(tmp_path)
    assert sorted(line["key"] for line in lines) == sorted(request_key("completion", {"i": i}) for i in range(30))
    assert len(ResponseCache(tmp_path)) == 30
