"""Every splitter's last word on its chunks: a code block or a table is never cut in the middle, no chunk is too
short to mean anything on its own, and none the guard makes is too long for the embedder to read whole."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from components.common.sentence_units import SENTENCE_ID

# The longest chunk the guard makes, in chunk sizes, unless `max_chars` says otherwise: a longer block is cut
# between its lines, and no merge passes it. 3 x 500 characters are about 350 e5 tokens of English prose, but up to
# 930 of a Chinese table: an embedder that truncates (MiniLM at 256 word pieces, e5 from the hub at 512) needs less.
BLOCK_CAP = 3
# CommonMark: a fence or table row may be indented by up to three spaces (four make an indented code block).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)
_TABLE_ROW = re.compile(r"^ {0,3}\|", re.MULTILINE)
_SEPARATOR_ROW = re.compile(r" {0,3}\|[\s:|-]*-[\s:|-]*")
_LINE = re.compile(r"[^\n]*\n|[^\n]+$")


@dataclass(frozen=True)
class Block:
    """A fenced code block or a Markdown table: `start` is its first mark (``` or |), `end` its last line's end."""

    start: int
    end: int
    header: str  # a table's header and separator rows, repeated atop each piece of a table cut between rows


@dataclass(frozen=True)
class Piece:
    """A span of the source, the chunk whose meta it keeps, and text put before it (a table piece's header)."""

    start: int
    end: int
    meta: dict[str, Any]
    prefix: str = ""
    original: Document | None = None  # the chunk itself while the piece is that chunk, unchanged


@component
class ChunkGuard:
    """
    Merge chunks that cut a fenced code block (``` or ~~~) or a Markdown table (a run of lines starting with `|`),
    and chunks with fewer than `min_chars` non-blank characters, into their neighbours, never past `max_chars`.

    It runs after `ChunkSpanLocator`, on spans rather than texts: a merged chunk is the source text of its members'
    union span, so overlapping members share their overlap once and nothing between them is lost. A union that
    would pass `max_chars` is cut at the edges of the blocks it holds instead, each block whole, the text around
    them joined to a block while it fits. A block longer than `max_chars` is cut between its lines into pieces of
    at most `chunk_size` characters, a table's header (and separator) row repeated atop each later piece's content
    (its span stays the rows', as a heading prefix does), a line longer than that a piece of its own. A short
    chunk that cannot join the next within `max_chars` joins the one before, or stays short. A chunk the guard
    makes keeps the meta of the chunk its start lay in, the meta of its source document (access included); a chunk
    left as it was is passed on untouched. Where the chunks number sentences (`sentence_id`, a sentence-window
    index), a document's are renumbered 0, 1, ... after merging, as `SentenceWindowExpander` reads them.

    ### Usage example
    ```python
    guard = ChunkGuard(min_chars=40, chunk_size=500, max_chars=1200)
    guard.run(documents=located_chunks, sources=source_documents)["documents"]
    ```
    """

    def __init__(self, min_chars: int = 0, chunk_size: int = 500, max_chars: int | None = None) -> None:
        """
        :param min_chars: Non-blank characters a chunk needs; a shorter one joins the next (the last, the previous).
        :param chunk_size: The splitter's chunk size: the most characters of a piece of an oversize block.
        :param max_chars: The most characters of a chunk the guard makes, at least `chunk_size`; None: `BLOCK_CAP`
            chunk sizes.
        :raises ValueError: when `min_chars` < 0, `chunk_size` < 1 or `max_chars` < `chunk_size`.
        """
        if min_chars < 0:
            raise ValueError(f"min_chars must be >= 0, got {min_chars}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        if max_chars is not None and max_chars < chunk_size:
            raise ValueError(f"max_chars must be >= chunk_size ({chunk_size}) or None, got {max_chars}")
        self.min_chars = min_chars
        self.chunk_size = chunk_size
        self.max_chars = max_chars
        self.cap = BLOCK_CAP * chunk_size if max_chars is None else max_chars

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(
            self, min_chars=self.min_chars, chunk_size=self.chunk_size, max_chars=self.max_chars
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChunkGuard:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document], sources: list[Document]) -> dict[str, list[Document]]:
        """
        :param documents: Chunks with meta `doc_id` and `span` (ChunkSpanLocator's output).
        :param sources: The documents they were cut from (`id == meta["doc_id"]`).
        :returns: `documents`: the chunks, each document's in span order, merged and cut as described above.
        :raises ValueError: when a chunk's source is missing.
        """
        texts = {source.id: source.content or "" for source in sources}
        by_source: dict[str, list[Document]] = {}
        for chunk in documents:
            doc_id = chunk.meta["doc_id"]
            if doc_id not in texts:
                raise ValueError(f"sources: no source document with id {doc_id!r} for chunk {chunk.id!r}.")
            by_source.setdefault(doc_id, []).append(chunk)
        guarded: list[Document] = []
        for doc_id, chunks in by_source.items():
            guarded += self._guard(doc_id, texts[doc_id], sorted(chunks, key=lambda c: tuple(c.meta["span"])))
        return {"documents": guarded}

    def _guard(self, doc_id: str, text: str, chunks: list[Document]) -> list[Document]:
        blocks = find_blocks(text)
        if not blocks and not self.min_chars:
            return chunks
        oversize = [block for block in blocks if block.end - block.start > self.cap]
        kept = [block for block in blocks if block.end - block.start <= self.cap]
        pieces = [Piece(*chunk.meta["span"], meta=chunk.meta, original=chunk) for chunk in chunks]
        if oversize:
            pieces = self._cut_oversize(text, pieces, oversize)
        pieces = [piece for group in _cut_groups(pieces, kept) for piece in self._fit(text, group, kept)]
        if self.min_chars:
            pieces = self._merge_short(text, pieces)
        out = [_document(doc_id, text, piece) for piece in pieces]
        if any(SENTENCE_ID in chunk.meta for chunk in chunks):
            out = [replace(doc, meta={**doc.meta, SENTENCE_ID: i}) for i, doc in enumerate(out)]
        return out

    def _cut_oversize(self, text: str, pieces: list[Piece], oversize: list[Block]) -> list[Piece]:
        """Chunks lose what lies inside an oversize block; the block comes back as line-aligned pieces."""
        outside: list[Piece] = []
        for piece in pieces:
            for start, end in _minus(piece.start, piece.end, oversize):
                if text[start:end].strip():
                    whole = (start, end) == (piece.start, piece.end)
                    outside.append(
                        replace(piece, start=start, end=end, original=piece.original if whole else None)
                    )
        for block in oversize:
            covering = [p for p in pieces if p.start < block.end and block.start < p.end]
            if covering:
                outside += self._block_pieces(text, block, covering)
        return sorted(outside, key=lambda p: (p.start, p.end))

    def _block_pieces(self, text: str, block: Block, covering: list[Piece]) -> list[Piece]:
        """The block's lines packed into pieces of at most `chunk_size` characters with the header (one line
        at least); the first piece holds the header in its own span, later ones as a prefix."""
        ends = [m.end() for m in _LINE.finditer(text, block.start + len(block.header), block.end)]
        if not ends:
            return [Piece(block.start, block.end, _at(covering, block.start).meta)]
        pieces: list[Piece] = []
        start, prefix = block.start, ""
        for end, following in zip(ends, [*ends[1:], None], strict=True):
            if following is None or len(prefix) + following - start > self.chunk_size:
                pieces.append(Piece(start, end, _at(covering, start).meta, prefix))
                start, prefix = end, block.header
        return pieces

    def _fit(self, text: str, group: list[Piece], blocks: list[Block]) -> list[Piece]:
        """The group's union when it fits `cap`; else its span cut at the edges of the blocks in it and at its
        members' starts outside them, the parts packed in order into pieces of at most `cap` characters (a
        whitespace-only one dropped)."""
        union = group[0]
        for piece in group[1:]:
            union = _union(union, piece)
        if len(group) == 1 or union.end - union.start <= self.cap:
            return [union]
        edges = {edge for block in blocks for edge in (block.start, block.end)}
        edges |= {piece.start for piece in group if not _inside(piece.start, blocks)}
        cuts = [union.start, *sorted(e for e in edges if union.start < e < union.end), union.end]
        spans: list[tuple[int, int]] = []
        for start, end in pairwise(cuts):
            if spans and end - spans[-1][0] <= self.cap:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
        return [_part(group, start, end) for start, end in spans if text[start:end].strip()]

    def _merge_short(self, text: str, pieces: list[Piece]) -> list[Piece]:
        """A piece under `min_chars` non-blank characters joins the next, else the one before, while the union fits
        `cap`; a short last one joins the one before."""
        merged: list[Piece] = []
        for piece in pieces:
            if merged and self._short(text, merged[-1]):
                if self._fits(merged[-1], piece):
                    merged[-1] = _union(merged[-1], piece)
                    continue
                if len(merged) > 1 and self._fits(merged[-2], merged[-1]):
                    short = merged.pop()
                    merged[-1] = _union(merged[-1], short)
            merged.append(piece)
        if len(merged) > 1 and self._short(text, merged[-1]) and self._fits(merged[-2], merged[-1]):
            last = merged.pop()
            merged[-1] = _union(merged[-1], last)
        return merged

    def _short(self, text: str, piece: Piece) -> bool:
        return sum(not c.isspace() for c in text[piece.start : piece.end]) < self.min_chars

    def _fits(self, first: Piece, second: Piece) -> bool:
        return max(first.end, second.end) - min(first.start, second.start) <= self.cap


def find_blocks(text: str) -> list[Block]:
    """Fenced code blocks (an unclosed fence runs to the end) and, outside them, runs of table rows, in order."""
    blocks: list[Block] = []
    at = 0
    while fence := _FENCE.search(text, at):
        mark = fence.group(1)
        close = re.compile(rf"^ {{0,3}}{re.escape(mark[0])}{{{len(mark)},}}[ \t]*$", re.MULTILINE)
        closing = close.search(text, fence.end())
        end = closing.end() if closing else len(text.rstrip())
        blocks.append(Block(fence.end() - len(mark), end, ""))
        at = end
    return sorted(blocks + list(_tables(text, blocks)), key=lambda block: block.start)


def _tables(text: str, fences: list[Block]) -> Iterator[Block]:
    rows = [m for m in _TABLE_ROW.finditer(text) if not _inside(m.start(), fences, inclusive=True)]
    run: list[tuple[int, int]] = []
    for row in rows:
        line_end = text.find("\n", row.start())
        line = (row.start(), len(text) if line_end < 0 else line_end)
        if run and line[0] != run[-1][1] + 1:
            yield _table(text, run)
            run = []
        run.append(line)
    if run:
        yield _table(text, run)


def _table(text: str, lines: list[tuple[int, int]]) -> Block:
    start = text.index("|", lines[0][0])
    header = lines[:2] if len(lines) > 1 and _SEPARATOR_ROW.fullmatch(text, *lines[1]) else lines[:1]
    return Block(start, lines[-1][1], text[start : min(header[-1][1] + 1, lines[-1][1])])


def _inside(at: int, blocks: list[Block], inclusive: bool = False) -> bool:
    """Whether `at` falls strictly inside one of `blocks` (sorted by start); `inclusive` counts their edges."""
    i = bisect_right([block.start for block in blocks], at) - 1
    if i < 0:
        return False
    block = blocks[i]
    return block.start <= at <= block.end if inclusive else block.start < at < block.end


def _minus(start: int, end: int, blocks: list[Block]) -> Iterator[tuple[int, int]]:
    """The parts of [start, end) outside `blocks`."""
    for block in blocks:
        if block.start < end and start < block.end:
            if start < block.start:
                yield start, block.start
            start = max(start, block.end)
    if start < end:
        yield start, end


def _cut_groups(pieces: list[Piece], blocks: list[Block]) -> list[list[Piece]]:
    """Consecutive pieces group while the boundary between them (either one's edge) falls inside a block, or the
    later one lies inside the group."""
    groups: list[list[Piece]] = []
    end = 0
    for piece in pieces:
        if groups and (_inside(end, blocks) or _inside(piece.start, blocks) or piece.end <= end):
            groups[-1].append(piece)
        else:
            groups.append([piece])
        end = max(end, piece.end) if len(groups[-1]) > 1 else piece.end
    return groups


def _at(pieces: list[Piece], at: int) -> Piece:
    """The first of `pieces` (in span order) that holds position `at`; the first one when none does."""
    return next((piece for piece in pieces if piece.start <= at < piece.end), pieces[0])


def _part(group: list[Piece], start: int, end: int) -> Piece:
    """The span [start, end) of a group, with the meta (and prefix) of the member its start lies in."""
    member = _at(group, start)
    if (member.start, member.end) == (start, end):
        return member
    return replace(
        member, start=start, end=end, prefix=member.prefix if start == member.start else "", original=None
    )


def _union(first: Piece, second: Piece) -> Piece:
    """One piece spanning both: the first one's meta and prefix, the source text in between once."""
    start, end = min(first.start, second.start), max(first.end, second.end)
    unchanged = first.original if (start, end) == (first.start, first.end) else None
    return replace(first, start=start, end=end, original=unchanged)


def _document(doc_id: str, text: str, piece: Piece) -> Document:
    """The piece as a chunk: the original while unchanged, else its text under the id ChunkSpanLocator would give."""
    if piece.original is not None and not piece.prefix:
        return piece.original
    meta = {**piece.meta, "span": [piece.start, piece.end]}
    content = piece.prefix + text[piece.start : piece.end]
    return Document(id=f"{doc_id}#{piece.start}-{piece.end}", content=content, meta=meta)
