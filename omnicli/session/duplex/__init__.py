"""The duplex lane of a realtime session (vLLM-Omni's `/v1/realtime?duplex=1`): listening while speaking, overlap, playback truth, resumable sockets."""
