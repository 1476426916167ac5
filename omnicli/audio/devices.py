"""Sound devices through sounddevice (PortAudio): loaded only when a command plays or records,
and looked up with one clear error when there is nothing to use."""

from omnicli.errors import AudioDeviceError


def sounddevice():
    """The sounddevice module, loaded on first use, or one clear error when PortAudio is missing."""
    try:
        import sounddevice as sd
    except OSError as exc:  # the PortAudio library itself is missing
        raise AudioDeviceError(f"cannot load PortAudio (apt-get install libportaudio2): {exc}") from exc
    return sd


def find_device(device: str | int | None, kind: str) -> dict:
    """The device's description; `kind` is 'input' or 'output'."""
    sd = sounddevice()
    try:
        return sd.query_devices(device, kind)
    except (sd.PortAudioError, ValueError) as exc:
        which = f"no audio {kind} device is available" if device is None else f"no {kind} device {device!r}"
        raise AudioDeviceError(f"{which} ({exc}); is a sound server running?") from exc


def device_table(devices) -> str:
    """The devices PortAudio found, one per line (index, name, inputs, outputs, default rate);
    none at all is an error, not an empty listing."""
    if len(devices) == 0:
        raise AudioDeviceError("no audio devices found; is a sound server (PulseAudio, PipeWire) running?")
    return "\n".join(
        f"{n:>3}  {d['name']}  (in {d['max_input_channels']}, out {d['max_output_channels']}, "
        f"{int(d['default_samplerate'])} Hz)"
        for n, d in enumerate(devices)
    )
