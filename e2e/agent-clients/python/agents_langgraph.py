"""A LangChain agent (`create_agent`, a LangGraph graph) on LangChain's own fake chat model, with one tool that
toolgate gates through `ToolgateMiddleware`. The tool appends to a runs file, so a test counts its runs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool

from toolgate_client import AsyncGate, Gate
from toolgate_client.langchain import ToolgateMiddleware


class FakeToolModel(GenericFakeChatModel):
    """`GenericFakeChatModel` that accepts tools (it answers from its script whatever they are) and keeps the
    messages of each call, so a test sees what reached the model."""

    seen: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> FakeToolModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def script(memo: str, amount: int = 70) -> Iterator[AIMessage]:
    """The model's turns: one call of `transfer_money`, then a closing answer."""
    call = {"name": "transfer_money", "args": {"amount": amount, "memo": memo}, "id": "call_transfer_1"}
    return iter([AIMessage(content="", tool_calls=[call]), AIMessage(content="done")])


def transfer_tool(runs: Path) -> Any:
    @tool
    def transfer_money(amount: int, memo: str) -> str:
        """Sends money."""
        with runs.open("a") as f:
            f.write(memo + "\n")
        return f"sent {amount}"

    return transfer_money


def build_agent(
    gate: Gate | AsyncGate, memo: str, runs: Path, *, key_prefix: str, model: FakeToolModel | None = None
) -> Any:
    model = model or FakeToolModel(messages=script(memo))
    middleware = ToolgateMiddleware(gate, interrupt_on={"transfer_money": True}, key_prefix=key_prefix)
    return create_agent(model=model, tools=[transfer_tool(runs)], middleware=[middleware])
