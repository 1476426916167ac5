"""Connection settings: flag > environment > config file > default, as the commands see them
(the scripted engine factory records the connection each command chose)."""

import pytest

from omnicli.config import DEFAULT_TIMEOUT, Connection
from tests.helpers.cli_harness import ScriptedEngines, omni

FILE = 'server = "http://file:1"\napi_key = "file-key"\ntimeout = 30\n'


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(FILE)
    return str(path)


def chosen(*args: str, env: dict) -> Connection:
    engines = ScriptedEngines()
    result = omni("chat", "Hi", *args, engines=engines, env=env)
    assert result.exit_code == 0, result.stderr
    (choice,) = engines.choices
    return choice.connection


def test_nothing_set_means_in_process_and_the_default_timeout():
    assert chosen(env={}) == Connection(None, None, DEFAULT_TIMEOUT)


def test_the_file_applies_when_nothing_else_is_set(config):
    assert chosen(env={"OMNI_CONFIG": config}) == Connection("http://file:1", "file-key", 30.0)


def test_environment_beats_the_file(config):
    env = {"OMNI_CONFIG": config, "OMNI_SERVER": "http://env:2/v1/", "OMNI_API_KEY": "env-key", "OMNI_TIMEOUT": "45"}
    assert chosen(env=env) == Connection("http://env:2", "env-key", 45.0)


def test_openai_variables_count_after_omnis_own(config):
    env = {"OMNI_CONFIG": config, "OPENAI_BASE_URL": "https://api.example/v1", "OPENAI_API_KEY": "sk-1"}
    assert chosen(env=env) == Connection("https://api.example", "sk-1", 30.0)
    env |= {"OMNI_SERVER": "http://env:2", "OMNI_API_KEY": "env-key"}
    assert chosen(env=env) == Connection("http://env:2", "env-key", 30.0)


def test_flags_beat_the_environment(config):
    env = {"OMNI_CONFIG": config, "OMNI_SERVER": "http://env:2", "OMNI_API_KEY": "env-key", "OMNI_TIMEOUT": "45"}
    connection = chosen("--server", "http://flag:3", "--api-key", "flag-key", "--timeout", "2.5", env=env)
    assert connection == Connection("http://flag:3", "flag-key", 2.5)


@pytest.mark.parametrize("env, line", [
    ({"OMNI_TIMEOUT": "soon"}, "OMNI_TIMEOUT: timeout must be a number of seconds, got 'soon'"),
    ({"OMNI_TIMEOUT": "0"}, "OMNI_TIMEOUT: timeout must be between 0 and 86400 seconds, got '0'"),
    ({"OMNI_SERVER": "127.0.0.1:8091"}, "OMNI_SERVER: server URL must start with http:// or https://, got '127.0.0.1:8091'"),
    ({"OMNI_SERVER": "http://127.0.0.1:99999"}, "OMNI_SERVER: 'http://127.0.0.1:99999' is not a valid URL: Port out of range 0-65535"),
    ({"OMNI_SERVER": "http://:8091"}, "OMNI_SERVER: 'http://:8091' is not a valid URL: it names no host"),
])
def test_bad_settings_are_one_line(env, line):
    engines = ScriptedEngines()
    result = omni("chat", "Hi", engines=engines, env=env)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"omni: error: {line}\n")
    assert engines.choices == []


def test_a_broken_config_file_is_one_line(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("server = \n")
    result = omni("chat", "Hi", engines=ScriptedEngines(), env={"OMNI_CONFIG": str(path)})
    assert result.exit_code == 2
    assert result.stderr.startswith(f"omni: error: cannot read config file {path}: ")
    assert result.stderr.count("\n") == 1


def test_bad_timeout_in_the_file_names_the_file(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("timeout = -1\n")
    result = omni("chat", "Hi", engines=ScriptedEngines(), env={"OMNI_CONFIG": str(path)})
    assert result.stderr == f"omni: error: timeout in {path}: timeout must be between 0 and 86400 seconds, got -1\n"
