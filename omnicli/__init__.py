"""omni: a command-line toolkit for speech and omni-modal models."""

__version__ = "0.1.0"
