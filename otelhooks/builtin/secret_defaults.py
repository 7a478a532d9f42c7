"""The built-in detectors, in the order the redactor runs them (highest priority first)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from .secret_detectors import (
    DataUrlDetector,
    DerPrivateKeyDetector,
    Detector,
    EncodedBlobDetector,
    FormatDetector,
    KeyNameDetector,
    KubernetesSecretDetector,
    NearbyEvidenceDetector,
    ShapeDetector,
    TableDetector,
)
from .secret_rules import SecretPattern
from .secret_unlabelled import UnlabelledTokenDetector

__all__ = ["default_detectors"]


def default_detectors(patterns: Sequence[SecretPattern]) -> list[Detector]:
    """The built-in detectors over ``patterns`` (built once per set of patterns: they hold
    nothing a redactor changes)."""
    return list(_default_detectors(tuple(patterns)))


@functools.lru_cache(maxsize=32)
def _default_detectors(patterns: tuple[SecretPattern, ...]) -> tuple[Detector, ...]:
    return (
        FormatDetector(patterns),
        KeyNameDetector(),
        TableDetector(),
        KubernetesSecretDetector(),
        DerPrivateKeyDetector(),
        DataUrlDetector(),
        NearbyEvidenceDetector(),
        ShapeDetector(),
        EncodedBlobDetector(),
        UnlabelledTokenDetector(),
    )
