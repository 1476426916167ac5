"""The acceptance layer: real models, real servers and clients, PulseAudio devices."""
