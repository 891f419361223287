"""Non-text prompt content: images, audio, video, PDFs and other MIME payloads.

A modality is either a URI descriptor (never fetched by the library) or inline bytes with an
explicit MIME type. Providers decide how to send each; the library never downloads media.
"""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

__all__ = ["PDF", "Audio", "Image", "Mime", "Video", "modality_from_json"]

_SNIFF: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"ID3", "audio/mpeg"),
    (b"OggS", "audio/ogg"),
)


def _sniff(data: bytes) -> str | None:
    for magic, mime in _SNIFF:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    if data[4:8] == b"ftyp":
        return "video/mp4"
    return None


@dataclass(frozen=True, eq=True, repr=False)
class Mime:
    """A MIME-typed payload given by ``uri`` or by inline ``data`` (exactly one of the two)."""

    mime_type: str
    data: bytes | None = None
    uri: str | None = None
    kind: ClassVar[str] = "mime"
    prefix: ClassVar[str] = ""
    default_mime: ClassVar[str] = "application/octet-stream"
    _registry: ClassVar[dict[str, type[Mime]]] = {}
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    _kinds: ClassVar[frozenset[str]] = frozenset({"mime"})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Mime._registry[cls.kind] = cls
        Mime._kinds = Mime._kinds | {cls.kind}

    @staticmethod
    def kinds() -> frozenset[str]:
        """The ``kind`` of every payload class (``mime`` and its subclasses')."""
        return Mime._kinds

    def __post_init__(self) -> None:
        if (self.data is None) == (self.uri is None):
            raise ValueError(f"{type(self).__name__} needs exactly one of data= or uri=")
        if self.prefix and not self.mime_type.startswith(self.prefix):
            raise ValueError(f"{type(self).__name__} cannot hold MIME type {self.mime_type!r}")

    @classmethod
    def from_uri(cls, uri: str, mime_type: str | None = None) -> Self:
        """A descriptor only: the URI is not fetched, here or later, by the library."""
        mime = mime_type or mimetypes.guess_type(uri)[0] or cls.default_mime
        return cls(mime_type=mime, uri=uri)

    @classmethod
    def from_bytes(cls, data: bytes, mime_type: str | None = None) -> Self:
        mime = mime_type or _sniff(data) or cls.default_mime
        return cls(mime_type=mime, data=bytes(data))

    @classmethod
    def from_path(cls, path: str | Path, mime_type: str | None = None) -> Self:
        """Read a local file now (a small, bounded read, like ``open``)."""
        p = Path(path)
        data = p.read_bytes()
        mime = mime_type or mimetypes.guess_type(p.name)[0] or _sniff(data) or cls.default_mime
        return cls(mime_type=mime, data=data)

    def to_base64(self) -> str:
        if self.data is None:
            raise ValueError("this modality is a URI descriptor and holds no bytes")
        return base64.b64encode(self.data).decode("ascii")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "mime_type": self.mime_type}
        if self.uri is not None:
            out["uri"] = self.uri
        else:
            out["data"] = self.to_base64()
        return out

    def __repr__(self) -> str:
        where = self.uri if self.uri is not None else f"{len(self.data or b'')} bytes"
        return f"{type(self).__name__}({self.mime_type}, {where})"

    def placeholder(self) -> str:
        """How this part reads inside ``Message.text``."""
        return f"<{self.kind}:{self.uri or self.mime_type}>"


class Image(Mime):
    kind: ClassVar[str] = "image"
    prefix: ClassVar[str] = "image/"
    default_mime: ClassVar[str] = "image/png"


class Audio(Mime):
    kind: ClassVar[str] = "audio"
    prefix: ClassVar[str] = "audio/"
    default_mime: ClassVar[str] = "audio/wav"


class Video(Mime):
    kind: ClassVar[str] = "video"
    prefix: ClassVar[str] = "video/"
    default_mime: ClassVar[str] = "video/mp4"


class PDF(Mime):
    kind: ClassVar[str] = "pdf"
    prefix: ClassVar[str] = "application/pdf"
    default_mime: ClassVar[str] = "application/pdf"


def modality_from_json(data: dict[str, Any]) -> Mime:
    cls = Mime._registry.get(data.get("kind", ""), Mime) if data.get("kind") != "mime" else Mime
    raw = data.get("data")
    if raw is not None:
        return cls(mime_type=data["mime_type"], data=base64.b64decode(raw))
    return cls(mime_type=data["mime_type"], uri=data["uri"])
