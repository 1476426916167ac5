"""A server that accepts the connection and never answers: the client gives up after the read
timeout the user set (--timeout / OMNI_TIMEOUT), with one line, instead of waiting minutes."""

import socket

import pytest

from tests.helpers.cli_harness import omni


@pytest.mark.parametrize("command", [["chat", "Hi"], ["speak", "Hi", "-o", "-"], ["speak", "--list-voices"]])
def test_timeout_flag_bounds_the_wait(silent_server, command):
    result = omni(*command, "--server", silent_server, "--timeout", "0.2")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (f"omni: error: the server at {silent_server} did not answer in time "
                             "(wait longer with --timeout SECONDS)\n")


def test_timeout_from_the_environment(silent_server):
    result = omni("chat", "Hi", "--server", silent_server, env={"OMNI_TIMEOUT": "0.2"})
    assert result.exit_code == 1 and "did not answer in time" in result.stderr


def test_a_closed_port_fails_at_once_with_one_line():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"  # bound, not listening: refused
        result = omni("speak", "Hi", "-o", "-", "--server", url)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"omni: error: cannot reach the server at {url}: ")
    assert result.stderr.count("\n") == 1
