"""Ollama's model residency: a model loads on the first request, stays loaded ``keep_alive``
after its last request ends, then unloads; the next request pays the load again (reported
as ``load_duration``).  A request's ``keep_alive`` sets that idle time (``0``: unload as soon
as it is done; negative: never), as Ollama does.

Expiry is checked lazily, when a request arrives: no timers.  With ``load_s == 0`` the model
is always loaded (the reference server's default).  Times come from the event loop's clock.
"""
from __future__ import annotations

import asyncio
import re

_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_keep_alive(value) -> float | None:
    """Ollama's ``keep_alive``: seconds as a number, or a Go duration (``"5m"``, ``"1h30m"``,
    ``"0"``, ``"-1m"``); None when absent.  Raises ValueError on anything else."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        raise ValueError(value)
    text = value.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("+-")
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return sign * float(text)
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(value)
    return sign * sum(float(n) * _UNIT_S[u] for n, u in parts)


class Residency:
    def __init__(self, load_s: float, keep_alive_s: float, evict_every: int = 0):
        self.load_s, self.default_keep_alive, self.evict_every = load_s, keep_alive_s, evict_every
        self.served = 0
        self.enabled = load_s > 0
        self.loaded = not self.enabled
        self.expires_at: float | None = None   # None while loaded: no expiry (in use, or forever)
        self.active = 0
        self._loading: asyncio.Task | None = None

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _check_expiry(self) -> None:
        if self.loaded and self.enabled and self.active == 0 and self.expires_at is not None \
                and self._now() >= self.expires_at:
            self.loaded = False

    async def acquire(self) -> float:
        """Hold the model for one request, loading it first if it is not loaded (concurrent
        requests share one load).  Returns the seconds this request waited for the load."""
        self._check_expiry()
        self.active += 1
        if self.loaded:
            return 0.0
        t0 = self._now()
        if self._loading is None:
            self._loading = asyncio.get_running_loop().create_task(self._load())
        try:
            await asyncio.shield(self._loading)
        except BaseException:
            self.active -= 1
            raise
        return self._now() - t0

    async def _load(self) -> None:
        try:
            await asyncio.sleep(self.load_s)
            self.loaded, self.expires_at = True, None
        finally:
            self._loading = None

    def release(self, keep_alive_s: float | None) -> None:
        """The request is done: the idle timer (its keep_alive, else the default) starts when
        the last request holding the model ends."""
        self.active = max(0, self.active - 1)
        ka = self.default_keep_alive if keep_alive_s is None else keep_alive_s
        self.expires_at = None if ka < 0 else self._now() + ka
        if self.enabled and self.active == 0 and ka == 0:
            self.loaded = False

    def served_one(self) -> None:
        """A generation request ended: with ``evict_every=N`` every N-th evicts the model, as
        another client's model would (Ollama with OLLAMA_MAX_LOADED_MODELS=1)."""
        self.served += 1
        if self.enabled and self.evict_every and self.served % self.evict_every == 0 and self.active == 0:
            self.loaded = False

    def running(self) -> dict | None:
        """What ``/api/ps`` lists: None when the model is not loaded."""
        self._check_expiry()
        if not self.loaded:
            return None
        return {"expires_in_s": None if self.expires_at is None else max(0.0, self.expires_at - self._now())}
