"""Fixtures the fast layer shares."""

import socket

import pytest


@pytest.fixture
def silent_server():
    """A real listening socket on 127.0.0.1: the kernel accepts connections; nothing answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
