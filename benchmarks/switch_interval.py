"""The cost of reading N sockets at 50 events/s each in one process, by read design and GIL switch
interval: the floor under the plugin's per-token CPU, without httpx (issue 39, part 5).

    .venv/bin/python benchmarks/switch_interval.py STREAMS MODE SWITCH_MS [WORK]

A child process feeds STREAMS loopback TCP connections one ~150-byte SSE event each, 50 times a
second per connection, for 6 s.  This process reads them (MODE):

* ``timeout``: one thread per socket, ``settimeout(60); recv()`` per read -- httpcore's sync
  stream: ``ioctl``, ``poll`` and ``recv``, three GIL releases per read;
* ``rcvtimeo``: one thread per socket, blocking ``recv()`` with ``SO_RCVTIMEO`` (the timeout in
  the kernel): one GIL release per read (``client/kernel_timeout.py``);
* ``selector``: one thread, ``selectors.DefaultSelector`` over all sockets.

Each event is split and ``json``-decoded WORK times (1: ~3 µs; 8: ~25 µs, about the plugin's
in-process cost per event).  Prints the process CPU (user + sys) per event and the context
switches: with many threads waiting for the GIL, each wakes every switch interval.
"""
import json
import resource
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time

MSG = (b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,'
       b'"text":" word","logprobs":null,"finish_reason":null}]}\n\n')
FEED = r"""
import socket, sys, time
N, HZ, SECS = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
msg = sys.stdin.buffer.read()
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(1024)
print(ls.getsockname()[1], flush=True)
cs = [ls.accept()[0] for _ in range(N)]
for c in cs: c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
period = 1.0 / HZ; t0 = time.monotonic() + 0.2; end = t0 + SECS; k = 0
while True:
    slot = k % N; due = t0 + (k // N) * period + slot * period / N
    if due > end: break
    d = due - time.monotonic()
    if d > 0: time.sleep(d)
    cs[slot].send(msg); k += 1
for c in cs: c.close()
"""
HZ, SECS = 50, 6.0
_decode = json.JSONDecoder().decode


def main() -> None:
    n, mode, switch_ms = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    work = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    feeder = subprocess.Popen([sys.executable, "-c", FEED, str(n), str(HZ), str(SECS)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    feeder.stdin.write(MSG)
    feeder.stdin.close()
    port = int(feeder.stdout.readline())
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    count = [0] * n

    def handle(data: bytes, i: int) -> None:
        time.perf_counter_ns()
        for ev in data.split(b"\n\n"):
            if ev.startswith(b"data: "):
                for _ in range(work):
                    _decode(ev[6:].decode())["choices"][0]["text"]
                count[i] += 1

    def reader(i: int) -> None:
        s = socks[i]
        if mode == "rcvtimeo":  # blocking socket, the timeout in the kernel
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("@ll", 60, 0))
        while True:
            if mode == "timeout":  # httpcore's sync stream
                s.settimeout(60)
            d = s.recv(65536)
            if not d:
                return
            handle(d, i)

    def selector() -> None:
        sel = selectors.DefaultSelector()
        for i, s in enumerate(socks):
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, i)
        live = n
        while live:
            for key, _ in sel.select(60):
                d = key.fileobj.recv(65536)
                if not d:
                    sel.unregister(key.fileobj)
                    live -= 1
                else:
                    handle(d, key.data)

    sys.setswitchinterval(switch_ms / 1000)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    if mode == "selector":
        selector()
    else:
        ts = [threading.Thread(target=reader, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    feeder.wait()
    ev = sum(count)
    user, system = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime
    print(f"{mode:9} streams={n} switch={switch_ms}ms work={work} events={ev} cpu={user + system:.2f}s "
          f"{(user + system) / ev * 1e6:.1f} µs/event (user {user / ev * 1e6:.1f}, sys {system / ev * 1e6:.1f}) "
          f"context switches: voluntary {r1.ru_nvcsw - r0.ru_nvcsw}, involuntary {r1.ru_nivcsw - r0.ru_nivcsw}")


if __name__ == "__main__":
    main()
