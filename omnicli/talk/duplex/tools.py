"""Tool calls a duplex model makes (Nemotron VoiceChat): omni talk runs none. Each call is shown,
and the model is told in the call's output that it was not run, rather than left waiting for a result."""

import json

from omnicli.protocol.duplex import ClientEvent

NO_TOOLS = "omni talk runs no tools, so this call was not run"


class ToolCalls:
    """The tool calls announced by the server, by call id, until their arguments are done."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def announced(self, item: dict) -> None:
        """`response.output_item.added`: a function call's name, kept for when its arguments come."""
        if item.get("type") == "function_call":
            self._names[str(item.get("call_id") or item.get("id"))] = str(item.get("name") or "")

    def called(self, event: dict) -> tuple[str, dict | None]:
        """`response.function_call_arguments.done`: the call as the transcript shows it, and the
        output to send back (None when the call has no id to answer)."""
        call_id = event.get("call_id")
        name = self._names.pop(str(call_id or event.get("item_id")), "") or str(event.get("name") or "a tool")
        shown = f"{name}({event.get('arguments') or ''})"
        if not call_id:
            return shown, None
        return shown, {"type": ClientEvent.ITEM_CREATE.value, "item": {
            "type": "function_call_output", "call_id": call_id, "output": json.dumps({"error": NO_TOOLS})}}
