"""How long a sleeping host thread takes to run again after it is woken, by how long it slept.

A waiter thread blocks on a threading.Event; the main thread sleeps IDLE ms, records the time
and sets the event; the waiter records the time it runs again. The difference is the wake-up
latency of a thread that slept about IDLE ms (the kernel's wake-up, the idle CPU's exit from
its idle state, Python's lock hand-off). Printed: the median and quartiles per IDLE, REPS
repetitions each, interleaved so that drifts spread evenly. No GPU involved.

Environment: REPS (60), IDLES (comma-separated ms: 0.05,0.2,0.5,1,2,5,10,30).
"""
import os
import threading
import time

REPS = int(os.environ.get("REPS", "60"))
IDLES = [float(x) for x in os.environ.get("IDLES", "0.05,0.2,0.5,1,2,5,10,30").split(",")]


def once(idle_ms):
    ev = threading.Event()
    woke = []

    def waiter():
        ev.wait()
        woke.append(time.perf_counter())

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.002)  # the waiter is asleep on the event before the timed idle begins
    time.sleep(idle_ms / 1e3)
    s = time.perf_counter()
    ev.set()
    t.join()
    return (woke[0] - s) * 1e6


res = {i: [] for i in IDLES}
for _ in range(REPS):
    for i in IDLES:
        res[i].append(once(i))
for i in IDLES:
    v = sorted(res[i])
    q = lambda f: v[int(f * (len(v) - 1))]  # noqa: E731
    print(f"idle {i:6.2f} ms: wake-up median {q(0.5):7.1f} us (quartiles {q(0.25):.1f} .. "
          f"{q(0.75):.1f}; max {v[-1]:.1f})", flush=True)
