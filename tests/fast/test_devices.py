"""Listing sound devices: a table of what PortAudio found, and one clear error when it found none."""

import pytest

from omnicli.audio.devices import device_table
from omnicli.errors import AudioDeviceError


def test_devices_are_listed_one_a_line():
    devices = [{"name": "pulse", "max_input_channels": 32, "max_output_channels": 32, "default_samplerate": 44100.0},
               {"name": "vspk", "max_input_channels": 0, "max_output_channels": 1, "default_samplerate": 48000.0}]
    assert device_table(devices).splitlines() == ["  0  pulse  (in 32, out 32, 44100 Hz)", "  1  vspk  (in 0, out 1, 48000 Hz)"]


def test_no_device_at_all_is_an_error_not_an_empty_listing():
    with pytest.raises(AudioDeviceError, match="no audio devices found; is a sound server"):
        device_table([])
