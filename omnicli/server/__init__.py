"""`omni serve`: the OpenAI-compatible HTTP and WebSocket server in front of an engine."""
