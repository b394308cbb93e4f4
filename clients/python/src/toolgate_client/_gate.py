"""`Gate`: the blocking client of the call-gating API.

Contract: `submit`, `get`, `start` and `finish` are one request each. `check` submits and waits (long polls of
at most 30 s each) until the call is decided, and returns the input to run or raises. `run` and the `gated`
decorator add the exactly-once claim: the function runs only after `start` succeeded, and `finish` records its
result or error. A retry with the same idempotency key (or, without one, the same tool and input within the
server's retry window) attaches to the same call, so a restarted process waits on the same approval and never
runs a call twice.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import httpx

from ._flow import POLL_SECONDS, Approved, Finished, bind_input, output_json, settle, settle_decision
from ._models import CallDecision, CallRequest, CallState, parse, wait_param
from .errors import AlreadyStarted, Expired, ProtocolError, ToolgateError, from_response

P = ParamSpec("P")
R = TypeVar("R")


class Gate:
    """A client of one toolgate server, acting as the principal of `token` (a bearer token)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        conversation_id: str | None = None,
        client: httpx.Client | None = None,
        timeout: float = 30.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self.conversation_id = conversation_id
        self._http = client or httpx.Client(timeout=timeout)
        self._headers = headers
        self._timeout = timeout

    def close(self) -> None:
        """Closes the HTTP connections."""
        self._http.close()

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _request(self, method: str, path: str, *, json_body: Any = None, wait: float | None = None) -> Any:
        timeout = self._timeout + (wait or 0)
        params = {"wait": wait_param(wait)} if wait else None
        try:
            response = self._http.request(
                method, self.url + path, json=json_body, params=params, headers=self._headers, timeout=timeout
            )
        except httpx.HTTPError as e:
            raise ToolgateError(f"{method} {path}: {e}") from e
        try:
            body = response.json() if response.content else None
        except json.JSONDecodeError:
            body = None
        if response.status_code >= 400:
            raise from_response(response.status_code, body, response.text)
        return body

    def submit(
        self,
        tool: str,
        input: Any,
        *,
        idempotency_key: str | None = None,
        conversation_id: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        wait: float | None = None,
    ) -> CallDecision:
        """`POST /api/calls`: asks for the call; with `wait` (seconds, at most 60) the server holds the answer."""
        request = CallRequest(
            tool=tool,
            input=input,
            conversation_id=conversation_id or self.conversation_id,
            idempotency_key=idempotency_key,
            description=description,
            input_schema=input_schema,
            wait=wait_param(wait),
        )
        body = self._request("POST", "/api/calls", json_body=request.to_json(), wait=None)
        return parse(CallDecision, body)

    def get(self, call_id: str, *, wait: float | None = None) -> CallState:
        """`GET /api/calls/{id}`: the call's state; with `wait`, held until it is decided or the wait ends."""
        return parse(CallState, self._request("GET", f"/api/calls/{call_id}", wait=wait))

    def start(self, call_id: str) -> CallState:
        """`POST /api/calls/{id}/start`: the claim before the side effect; a second is `AlreadyStarted`."""
        try:
            return parse(CallState, self._request("POST", f"/api/calls/{call_id}/start"))
        except ToolgateError as e:
            if e.code == "call_already_started":
                raise AlreadyStarted(call_id, e.message) from e
            raise

    def finish(self, call_id: str, *, output: Any = None, error: str | None = None) -> CallState:
        """`POST /api/calls/{id}/finish` with the run's `output`, or its `error`."""
        body = {"error": error} if error is not None else {"output": output}
        return parse(CallState, self._request("POST", f"/api/calls/{call_id}/finish", json_body=body))

    def wait(self, call_id: str, *, timeout: float | None = None) -> CallState:
        """Long-polls until the call is decided; past `timeout` seconds (default: as long as the server holds the
        approval open, which ends at its expiry) raises `Expired`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL_SECONDS if deadline is None else min(POLL_SECONDS, deadline - time.monotonic())
            state = self.get(call_id, wait=max(left, 0))
            if state.decided:
                return state
            if deadline is not None and time.monotonic() >= deadline:
                raise Expired(call_id, f"not decided within {timeout} s")

    def decide(self, tool: str, input: Any, *, timeout: float | None = None, **options: Any) -> Approved | Finished:
        """Submits and waits: `Approved` to run, `Finished` when a previous attempt ran it; raises `Denied`,
        `Expired` or `AlreadyStarted`. `options` are `submit`'s."""
        decision = self.submit(tool, input, **options)
        approved = settle_decision(decision)
        if approved is not None:
            return approved
        return self.outcome(decision.call_id, timeout=timeout)

    def outcome(self, call_id: str, *, timeout: float | None = None) -> Approved | Finished:
        """Waits for a call submitted before: `Approved` to run, `Finished` when it ran; raises when it must not run."""
        while True:
            outcome = settle(self.wait(call_id, timeout=timeout))
            if outcome is not None:
                return outcome

    def check(self, tool: str, input: Any, *, timeout: float | None = None, **options: Any) -> Any:
        """The input to run (as approved, edited or not), once the call is allowed; raises `Denied` or `Expired`."""
        outcome = self.decide(tool, input, timeout=timeout, **options)
        if isinstance(outcome, Finished):
            raise AlreadyStarted(outcome.call_id, "the call was already run")
        return outcome.input

    def run(
        self, tool: str, input: dict[str, Any], fn: Callable[..., R], *, timeout: float | None = None, **options: Any
    ) -> R:
        """Gates, claims, runs `fn(**input_to_run)` once and records the outcome; on a retry of a call that
        already finished, returns the recorded output without running it again."""
        outcome = self.decide(tool, input, timeout=timeout, **options)
        if isinstance(outcome, Finished):
            return outcome.output  # type: ignore[no-any-return]
        self.start(outcome.call_id)
        try:
            result = fn(**outcome.input)
        except Exception as e:
            self.finish(outcome.call_id, error=f"{type(e).__name__}: {e}")
            raise
        self.finish(outcome.call_id, output=output_json(result))
        return result

    def gated(
        self, tool: str, *, key: Callable[..., str] | None = None, **options: Any
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Decorates a function so each call is gated as `tool` and runs exactly once (see `run`). `key`, given
        the call's arguments by name, returns its idempotency key (default: the server matches the same tool
        and input within its retry window)."""

        def decorate(fn: Callable[P, R]) -> Callable[P, R]:
            @functools.wraps(fn)
            def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
                input = bind_input(fn, args, kwargs)
                idempotency_key = key(**input) if key else None
                return self.run(tool, input, fn, idempotency_key=idempotency_key, **options)

            return wrapper

        return decorate

    def stream(self, ids: list[str] | None = None) -> Iterator[CallState]:
        """`GET /api/calls/stream`: the calls named by `ids` (default: all the caller's) as they stand, then each
        change, until closed."""
        with self._http.stream(
            "GET",
            self.url + "/api/calls/stream",
            params={"ids": ",".join(ids)} if ids else None,
            headers=self._headers,
            timeout=httpx.Timeout(self._timeout, read=None),
        ) as response:
            if response.status_code >= 400:
                response.read()
                raise from_response(response.status_code, _json_or_none(response.text), response.text)
            for line in response.iter_lines():
                if line.startswith("data:"):
                    try:
                        yield parse(CallState, json.loads(line[5:].strip()))
                    except json.JSONDecodeError as e:
                        raise ProtocolError(f"an event that is not JSON: {line[:200]}") from e


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None
