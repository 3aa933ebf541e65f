"""The event stream of a workflow (``GET /v1/workflows/{id}/events``).

A text/event-stream whose events are entries, each with ``id:`` its index.
The iterators follow it and reconnect when it drops, resuming with
``Last-Event-ID`` = the last index yielded, so the caller sees every entry
once, in log order, across reconnections, server restarts and (with
several servers) failovers. Every entry is read from its leaf.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, AsyncIterator, Callable, Iterable, Iterator, Optional
from urllib.parse import quote

import httpx

from .errors import HTTPError, UnverifiedError

if TYPE_CHECKING:
    from .client import AsyncClient, Client, Entry

MAX_EVENT = 4 << 20


class _SSE:
    """Parses server-sent event lines into entries after ``after``."""

    def __init__(self, after: int, kinds: Optional[frozenset] = None) -> None:
        self.after = after
        self.kinds = kinds
        self.id = ""
        self.event = ""
        self.data: Optional[list[str]] = None
        self.size = 0

    def line(self, line: str) -> "Optional[Entry]":
        from .client import check_entry

        if line == "":
            out = None
            if self.data is not None and self.event in ("", "entry"):
                try:
                    e = json.loads("\n".join(self.data))
                except ValueError as err:
                    raise UnverifiedError(f"event stream: {err}") from None
                idx = e.get("index") if isinstance(e, dict) else None
                if self.id != str(idx) or type(idx) is not int or idx <= self.after:
                    raise UnverifiedError(f"event stream: entry {idx} (id {self.id!r}) after {self.after}")
                if self.kinds is not None and e.get("kind") not in self.kinds:
                    # Not asked for: passed over unread (its leaf is not parsed). A server that
                    # mislabels an entry could as well withhold it; what is yielded is verified.
                    self.after = idx
                    self.id, self.event, self.data, self.size = "", "", None, 0
                    return None
                out = check_entry(e)
                self.after = out.index
            self.id, self.event, self.data, self.size = "", "", None, 0
            return out
        if line.startswith(":"):
            return None
        self.size += len(line)
        if self.size > MAX_EVENT:
            raise UnverifiedError("event stream: an event over 4 MiB")
        fld, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if fld == "id":
            self.id = value
        elif fld == "event":
            self.event = value
        elif fld == "data":
            if self.data is None:
                self.data = []
            self.data.append(value)
        return None


def _path(workflow: str) -> str:
    return f"/v1/workflows/{quote(workflow, safe='')}/events"


def sync_events(client: "Client", workflow: str, after: int = 0, *, idle_timeout: float = 45.0,
                on_connect: Optional[Callable[[int], None]] = None, stop: Optional[Callable[[], bool]] = None,
                max_backoff: float = 2.0, kinds: Optional[Iterable[str]] = None) -> "Iterator[Entry]":
    backoff = 0.05
    si = client.servers.index(client.url)
    timeout = httpx.Timeout(client.timeout, read=idle_timeout)
    while not (stop and stop()):
        url = client.servers[si % len(client.servers)] + _path(workflow)
        p = _SSE(after, frozenset(kinds) if kinds is not None else None)
        try:
            with client._http.stream("GET", url, headers={"accept": "text/event-stream", "last-event-id": str(after)}, timeout=timeout) as r:
                if r.status_code != 200:
                    raise HTTPError(r.status_code, "", f"events of {workflow}")
                if on_connect:
                    on_connect(after)
                backoff = 0.05
                for line in r.iter_lines():
                    e = p.line(line)
                    after = p.after
                    if e is not None:
                        yield e
                    if stop and stop():
                        return
        except (httpx.TransportError, HTTPError):
            si += 1
        time.sleep(backoff)
        backoff = min(2 * backoff, max_backoff)


async def async_events(client: "AsyncClient", workflow: str, after: int = 0, *, idle_timeout: float = 45.0,
                       on_connect: Optional[Callable[[int], None]] = None, max_backoff: float = 2.0,
                       kinds: Optional[Iterable[str]] = None,
                       on_disconnect: Optional[Callable[[BaseException], None]] = None) -> "AsyncIterator[Entry]":
    backoff = 0.05
    si = client.servers.index(client.url)
    timeout = httpx.Timeout(client.timeout, read=idle_timeout)
    while True:
        url = client.servers[si % len(client.servers)] + _path(workflow)
        p = _SSE(after, frozenset(kinds) if kinds is not None else None)
        try:
            async with client._http.stream("GET", url, headers={"accept": "text/event-stream", "last-event-id": str(after)}, timeout=timeout) as r:
                if r.status_code != 200:
                    raise HTTPError(r.status_code, "", f"events of {workflow}")
                if on_connect:
                    on_connect(after)
                backoff = 0.05
                async for line in r.aiter_lines():
                    e = p.line(line)
                    after = p.after
                    if e is not None:
                        yield e
                raise HTTPError(0, "", f"events of {workflow}: the server ended the stream")
        except (httpx.TransportError, HTTPError) as err:
            if on_disconnect:
                on_disconnect(err)
            si += 1
        await asyncio.sleep(backoff)
        backoff = min(2 * backoff, max_backoff)
