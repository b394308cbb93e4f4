"""toolgate-client: gate any agent's tool calls through a toolgate server.

`Gate` (blocking) and `AsyncGate` (asyncio) speak the call-gating API (`/api/calls`); the adapters for
LangChain/LangGraph (`toolgate_client.langchain`), the OpenAI Agents SDK (`toolgate_client.openai_agents`) and
Pydantic AI (`toolgate_client.pydantic_ai`) import their framework only when imported themselves.
"""

from ._async_gate import AsyncGate
from ._flow import Approved, Finished
from ._gate import Gate
from ._models import CallDecision, CallRequest, CallState, Decision, State
from .errors import AlreadyStarted, Denied, Expired, Failed, NotRun, ProtocolError, ToolgateError

__all__ = [
    "AlreadyStarted",
    "Approved",
    "AsyncGate",
    "CallDecision",
    "CallRequest",
    "CallState",
    "Decision",
    "Denied",
    "Expired",
    "Failed",
    "Finished",
    "Gate",
    "NotRun",
    "ProtocolError",
    "State",
    "ToolgateError",
]
