# Feeds: C-contiguous arrays of the right dtype are read in place (no copy), other layouts are
# copied once and train the same; bad feeds raise otter.Error with otter-train's message, and leave
# the session usable; long calls release the GIL.
import sys
import threading
import time

import numpy as np
import pytest

import otter
from conftest import MLP, batch, otter_train


@pytest.fixture
def session():
    return otter.TrainingSession(MLP, device="cpu", batch_size=16, accum=2, optimizer={"type": "sgd", "lr": 0.1})


def counters():
    return otter._otter._feed_counters()


def test_contiguous_feeds_are_not_copied(session, digits):
    feeds = batch(digits, 0, session.global_batch)
    assert all(a.flags.c_contiguous for a in feeds.values())
    # The tensor otter builds over an array reads the array's own buffer ...
    for a in feeds.values():
        assert otter._otter._tensor_address(a) == a.ctypes.data
    # ... and a step wraps every feed, copies none, and does not write them.
    before = {k: v.copy() for k, v in feeds.items()}
    c0 = counters()
    session.step(feeds)
    c1 = counters()
    assert c1["copied"] == c0["copied"]
    assert c1["wrapped"] - c0["wrapped"] == len(feeds)
    for k in feeds:
        assert np.array_equal(feeds[k], before[k])


def test_other_layouts_are_copied_once_and_train_the_same(digits):
    options = dict(device="cpu", batch_size=16, accum=2, optimizer={"type": "sgd", "lr": 0.1})
    a = otter.TrainingSession(MLP, **options)
    b = otter.TrainingSession(MLP, **options)
    feeds = batch(digits, 0, a.global_batch)
    strided = {
        "x": np.asfortranarray(feeds["x"]),                       # column-major
        "labels": np.repeat(feeds["labels"], 2)[::2],             # a strided view
    }
    assert not strided["x"].flags.c_contiguous and not strided["labels"].flags.c_contiguous
    assert otter._otter._tensor_address(strided["x"]) != strided["x"].ctypes.data
    c0 = counters()
    rb = b.step(strided)
    assert counters()["copied"] - c0["copied"] == 2
    assert a.step(feeds) == rb
    for k, v in a.parameters().items():
        assert np.array_equal(v, b.parameters()[k])


def cli_message(tmp_path, arrays):
    """otter-train's error for a data file holding `arrays`, with the file's path replaced by 'feeds'."""
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    r = otter_train("train", MLP, "--data", path, "--steps", 1, "--device", "cpu", check=False)
    assert r.returncode == 1 and r.stderr.startswith("error: "), r.stderr
    return r.stderr[len("error: "):].strip().replace(f"'{path}'", "'feeds'").replace(str(path), "feeds")


@pytest.mark.parametrize("case", ["dtype", "shape", "rank", "missing"])
def test_bad_feeds_raise_the_command_lines_error(case, session, digits, tmp_path):
    feeds = batch(digits, 0, session.global_batch)
    bad = dict(feeds)
    if case == "dtype":
        bad["x"] = feeds["x"].astype(np.float64)
    elif case == "shape":
        bad["x"] = np.zeros((32, 63), np.float32)
    elif case == "rank":
        bad["x"] = feeds["x"].reshape(32, 8, 8)
    else:
        del bad["labels"]
    with pytest.raises(otter.Error) as e:
        session.step(bad)
    assert isinstance(e.value, ValueError)
    assert str(e.value) == cli_message(tmp_path, bad)
    assert session.steps_taken == 0
    session.step(feeds)  # still usable
    assert session.steps_taken == 1


def test_other_bad_feeds(session, digits):
    feeds = batch(digits, 0, session.global_batch)
    with pytest.raises(otter.Error, match=r"feeds: unknown array 'image' \(the model takes: x, labels\)"):
        session.step(dict(feeds, image=feeds["x"]))
    with pytest.raises(otter.Error, match=r"a step takes K\*b = 2\*16 = 32 samples"):
        session.step({k: v[:31] for k, v in feeds.items()})
    with pytest.raises(otter.Error, match=r"feeds: array 'x' has numpy type complex64"):
        session.step(dict(feeds, x=feeds["x"].astype(np.complex64)))
    with pytest.raises(otter.Error, match=r"feeds: array 'x' is a dict, not an array of numbers"):
        session.step(dict(feeds, x={}))
    with pytest.raises(otter.Error, match=r"a micro-step takes b = 16 samples"):
        session.micro_step(feeds)
    with pytest.raises(otter.Error, match=r"an optimizer step takes K = 2 micro-steps, 0 were taken"):
        session.apply()
    with pytest.raises(otter.Error, match=r"feeds: array 'labels' is i32, the model expects i64"):
        session.evaluate(dict(feeds, labels=feeds["labels"].astype(np.int32)))
    assert session.steps_taken == 0 and session.pending_micro_steps == 0


def test_bad_options_raise(digits):
    with pytest.raises(otter.Error, match="precision must be fp32, fp16 or bf16, got 'fp8'"):
        otter.TrainingSession(MLP, precision="fp8")
    with pytest.raises(otter.Error, match="unknown option 'batchsize'"):
        otter.TrainingSession(MLP, batchsize=8)
    with pytest.raises(otter.Error, match="pass 'optimizer' has no option 'learning_rate'"):
        otter.TrainingSession(MLP, optimizer={"learning_rate": 0.1})
    with pytest.raises(otter.Error, match="schedule 'cosine' needs 'total'"):
        otter.TrainingSession(MLP, optimizer={"schedule": "cosine"})
    with pytest.raises(otter.Error, match="accum: expected an integer, got .four."):
        otter.TrainingSession(MLP, accum="four")
    with pytest.raises(otter.Error, match="no-such.onnx"):
        otter.TrainingSession("no-such.onnx")


def test_long_calls_release_the_gil(digits):
    # With a switch interval far longer than the test, another thread only gets the GIL when the
    # holder releases it: the main thread wakes during evaluate() only if evaluate released it.
    s = otter.TrainingSession(MLP, device="cpu", eval_batch_size=4096)
    big = {k: np.ascontiguousarray(np.concatenate([v] * 200)) for k, v in digits.items()}
    t0 = time.perf_counter()
    s.evaluate(big)
    alone = time.perf_counter() - t0
    assert alone > 0.05, f"evaluate took {alone:.3f} s, too short to observe"
    done = threading.Event()
    worker = threading.Thread(target=lambda: (s.evaluate(big), done.set()))
    old = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    try:
        worker.start()
        time.sleep(min(0.02, alone / 4))  # releases the GIL: the worker enters evaluate()
        during = not done.is_set()
    finally:
        sys.setswitchinterval(old)
        worker.join()
    assert during, "the main thread could not run while evaluate() ran: the GIL was held"


def test_threads_sharing_a_session_take_turns(digits):
    # Calls release the GIL, so two threads can call one session at once: they must take turns
    # (a lock per session), giving every step once and the same result as one thread. Steps of K=4
    # micro-steps interleaved without the lock would break the micro-step count or the state.
    options = dict(device="cpu", batch_size=64, accum=4, optimizer={"type": "sgd", "lr": 0.01})
    s = otter.TrainingSession(MLP, **options)
    feeds = batch(digits, 0, s.global_batch)
    errors = []

    def work():
        try:
            for _ in range(40):
                s.step(feeds)
                s.parameters()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and s.steps_taken == 80
    alone = otter.TrainingSession(MLP, **options)
    for _ in range(80):
        alone.step(feeds)
    for k, v in alone.parameters().items():
        assert np.array_equal(v, s.parameters()[k])
