# SPDX-License-Identifier: MIT
"""Python threads calling at once: the default mask, disjoint masks,
overlapping masks (they take turns), and the GIL released during a call."""
import threading
import time

import numpy as np
import pytest

import convgrad
from convgrad import _cores


def run_threads(work, count):
    results, errors = [None] * count, []

    def body(i):
        try:
            results[i] = work(i)
        except BaseException as e:  # reported by the test, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


@pytest.fixture(scope="module")
def layer():
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (4, 24, 24, 32)).astype(np.float32)
    dy = rng.uniform(-1, 1, (4, 24, 24, 32)).astype(np.float32)
    return x, dy, convgrad.conv2d_weight(x, dy, 3, padding=1, core_mask=1)


@pytest.mark.parametrize("masks", [(None, None), (None, None, None, None), (0b01, 0b10),
                                   (0b11, 0b01), (0b11, 0b11)],
                         ids=["default x2", "default x4", "disjoint", "overlapping", "same"])
def test_concurrent_calls(layer, masks):
    x, dy, expected = layer

    def work(i):
        return [convgrad.conv2d_weight(x, dy, 3, padding=1, core_mask=masks[i]) for _ in range(15)]

    for results in run_threads(work, len(masks)):
        for dw in results:
            np.testing.assert_allclose(dw, expected, rtol=1e-4, atol=1e-4)


def test_operator_concurrent_default_mask(layer):
    x, dy, expected = layer
    p = convgrad.ConvParameter(4, 4, 24, 24, 24, 24, 32, 32, 3, 3, pad_l_=1, pad_u_=1, pad_d_=1,
                               pad_r_=1)

    def work(i):
        out = np.zeros((32, 3, 3, 32), np.float32)
        for _ in range(10):
            convgrad.conv_grad_filter(dy, x, out, param=p)
        return out

    for out in run_threads(work, 3):
        np.testing.assert_allclose(out, 10 * expected, rtol=1e-4, atol=1e-3)


def test_reservations_wait_for_overlapping_cores():
    r = _cores.CoreReservations()
    r.acquire(0b01)
    got = threading.Event()

    def second():
        r.acquire(0b11)
        got.set()
        r.release(0b11)

    t = threading.Thread(target=second)
    t.start()
    assert not got.wait(0.2)  # core 0 is held: it waits
    r.acquire(0b100)  # a disjoint mask does not wait
    r.release(0b100)
    r.release(0b01)
    assert got.wait(5)
    t.join()


def test_gil_released_during_a_call():
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (8, 48, 48, 64)).astype(np.float32)
    dy = rng.uniform(-1, 1, (8, 48, 48, 64)).astype(np.float32)
    t = threading.Thread(target=lambda: [convgrad.conv2d_weight(x, dy, 3, padding=1)
                                         for _ in range(3)])
    start = time.perf_counter()
    t.start()
    spins = 0
    while t.is_alive():
        spins += 1
    elapsed = time.perf_counter() - start
    t.join()
    # Holding the GIL, the C call would leave this loop a few turns at most.
    assert elapsed > 0.01 and spins > 1000, (elapsed, spins)


def test_default_core_mask(monkeypatch):
    monkeypatch.setenv("CONVGRAD_CORE_MASK", "0b10")
    assert convgrad.default_core_mask() == 2
    monkeypatch.setenv("CONVGRAD_CORE_MASK", "lots")
    with pytest.raises(ValueError, match="CONVGRAD_CORE_MASK"):
        convgrad.default_core_mask()
    monkeypatch.delenv("CONVGRAD_CORE_MASK")
    import os
    expected = sum(1 << c for c in os.sched_getaffinity(0) if c < 32)
    assert convgrad.default_core_mask() == expected
