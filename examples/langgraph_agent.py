"""A LangGraph agent (model node + ``ToolNode``) whose tools run through otelhooks' hooks,
driven by LangChain's fake chat model, so it runs offline.

    python examples/langgraph_agent.py
"""

import asyncio

from _policy import REDACTOR, delete_file, read_file, shared_hooks
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from otelhooks.integrations.langchain import with_boundary
from otelhooks.telemetry.spantree import render_tree
from otelhooks.telemetry.testing import in_memory_tracing

model = FakeMessagesListChatModel(
    responses=[
        AIMessage(
            "",
            tool_calls=[
                {"name": "read_file", "args": {"path": "/srv/data/app.env"}, "id": "c1"},
                {"name": "delete_file", "args": {"path": "/srv/data/app.env"}, "id": "c2"},
            ],
        ),
        AIMessage("Done."),
    ]
)


def agent(state: MessagesState) -> dict:
    return {"messages": [model.invoke(state["messages"])]}


async def main() -> None:
    tracing = in_memory_tracing()
    tools = [StructuredTool.from_function(read_file), StructuredTool.from_function(delete_file)]
    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node(
        "tools",
        ToolNode(
            with_boundary(
                tools, shared_hooks(), tracer_provider=tracing.provider, scrubber=REDACTOR
            )
        ),
    )
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, ["tools", END])
    graph.add_edge("tools", "agent")
    out = await graph.compile().ainvoke({"messages": [HumanMessage("Clean up")]})
    for message in out["messages"]:
        if isinstance(message, ToolMessage):
            print(f"{message.tool_call_id}: {message.content}")
    print(out["messages"][-1].content)
    print(render_tree(tracing.spans()))


asyncio.run(main())
