"""Device selection shared by every chapter: `auto` means CUDA when present, else CPU."""

from __future__ import annotations

import re

import torch

VALID_DEVICES = ("auto", "cpu", "cuda", "cuda:N")


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Turn a user-facing device string into a `torch.device`.

    Raises `ValueError` (listing the valid values) for anything else, and for `cuda` when no
    CUDA device is present, so a typo never silently falls back to the CPU.
    """
    if isinstance(device, torch.device):
        return device
    name = str(device).strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or re.fullmatch(r"cuda:\d+", name):
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {device!r} requested but no CUDA device is available; "
                "use device='auto' or 'cpu'"
            )
        return torch.device(name)
    raise ValueError(f"unknown device {device!r}; valid values: {', '.join(VALID_DEVICES)}")


def describe_device(device: torch.device) -> str:
    """A human-readable name for the device (GPU model or CPU thread count)."""
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA)"
    return f"CPU ({torch.get_num_threads()} threads)"
