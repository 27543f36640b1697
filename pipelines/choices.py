"""Enums built from a component's own list of choices, for the config records that set them."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


def choices(name: str, values: Iterable[str]) -> type[StrEnum]:
    """An Enum whose members are `values`, each named as it is written, so a config value is checked against the
    list the component keeps: OmegaConf refuses anything else while Hydra composes, naming the key and the valid
    values. Being a str, a member passes wherever the component takes the plain string."""
    return StrEnum(name, [(value, value) for value in values])  # type: ignore[return-value]
