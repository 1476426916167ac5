"""The server's realtime sessions, one per `/v1/realtime` socket: the turn-based OpenAI Realtime session and the duplex lane."""
