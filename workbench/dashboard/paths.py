"""The dashboard's name for the resolver: the artifact folders and the one path resolver live in
``workbench.artifact_paths`` (the library resolves the paths records name through it too)."""

from workbench.artifact_paths import (
    AREAS,
    ENV_VAR,
    ArtifactRoots,
    OutsideArtifacts,
    artifact_roots,
    display,
    inside,
    resolve,
)

__all__ = [
    "AREAS",
    "ENV_VAR",
    "ArtifactRoots",
    "OutsideArtifacts",
    "artifact_roots",
    "display",
    "inside",
    "resolve",
]
