"""Sound devices through sounddevice (PortAudio): loaded only when a command plays or records,
and looked up with one clear error when there is nothing to use."""

from omnicli.errors import AudioDeviceError


def sounddevice():
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
