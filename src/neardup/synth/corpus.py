"""Real English technical text that exists offline on every machine with Python.

Tests and the demo need text that looks like documentation (long sentences, jargon, code
names), not lorem ipsum: shingle statistics of random words are far from those of real pages,
so a detector tuned on them says little. The docstrings of the standard library are such text,
ship with every interpreter, and need no download. They are read with `ast` only, never
imported, so no module code runs.

Determinism: files are visited in sorted order and nothing depends on hash seeds, so the same
Python version always yields the same documents.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sysconfig
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Folders of the stdlib that hold tests, vendored packages or tool data rather than modules.
_SKIP_DIRS = frozenset(
    {
        "site-packages",
        "dist-packages",
        "test",
        "tests",
        "idle_test",
        "__pycache__",
        "lib2to3",
        "ensurepip",
        "turtledemo",
        "config-3",
    }
)
_WORD = re.compile(r"\S+")
# Share of a page's shingles that may already occur in earlier pages before it is dropped.
_MAX_OVERLAP = 0.2


@dataclass(frozen=True)
class Section:
    """A heading (None for the lead section) and its paragraphs of running text."""

    heading: str | None
    paragraphs: tuple[str, ...]


@dataclass(frozen=True)
class Document:
    """One page of text: a module's docstrings merged under headings, like a reference page."""

    doc_id: str  # stable id, e.g. "stdlib:json.decoder"
    title: str
    sections: tuple[Section, ...]

    @property
    def paragraphs(self) -> list[str]:
        """All paragraphs in reading order, headings excluded."""
        return [p for s in self.sections for p in s.paragraphs]

    @property
    def words(self) -> list[str]:
        """Whitespace tokens of the headings and paragraphs, in reading order."""
        out = _WORD.findall(self.title)
        for s in self.sections:
            if s.heading:
                out.extend(_WORD.findall(s.heading))
            for p in s.paragraphs:
                out.extend(_WORD.findall(p))
        return out

    @property
    def slug(self) -> str:
        """A file-name-safe name for the page, e.g. "json.decoder"."""
        return self.doc_id.split(":", 1)[-1]


def stdlib_root() -> Path:
    """The folder of the running interpreter's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def _module_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(dotted module name, path) of public stdlib modules, in sorted order."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in _SKIP_DIRS and not d.startswith((".", "_"))
        )
        rel = Path(dirpath).relative_to(root)
        for name in sorted(filenames):
            if not name.endswith(".py") or (name.startswith("_") and name != "__init__.py"):
                continue
            parts = [*rel.parts, name[:-3]]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if not parts or any(not p.isidentifier() for p in parts):
                continue
            yield ".".join(parts), Path(dirpath) / name


def _paragraphs(doc: str) -> list[str]:
    """Split a cleaned docstring into paragraphs.

    Running text becomes one line per paragraph; a block of doctest or indented code keeps
    its line breaks (dedented), which is how a renderer tells code from prose.
    """
    out = []
    for block in re.split(r"\n\s*\n", doc):
        lines = [ln.rstrip() for ln in block.splitlines() if ln.strip()]
        if not lines:
            continue
        code = all(ln.startswith((" ", "\t")) for ln in lines) or lines[0].lstrip().startswith(
            ">>>"
        )
        if code:
            out.append(textwrap.dedent("\n".join(lines)))
            continue
        text = " ".join(ln.strip() for ln in lines)
        if len(text.split()) >= 3:
            out.append(text)
    return out


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    args = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
    if node.args.vararg:
        args.append("*" + node.args.vararg.arg)
    args += [a.arg for a in node.args.kwonlyargs]
    if node.args.kwarg:
        args.append("**" + node.args.kwarg.arg)
    return f"{node.name}({', '.join(args)})"


def _function_section(
    node: ast.FunctionDef | ast.AsyncFunctionDef, owner: str = ""
) -> Section | None:
    doc = ast.get_docstring(node)
    if not doc:
        return None
    return Section(f"{owner}{_signature(node)}", tuple(_paragraphs(doc)))


def _class_sections(node: ast.ClassDef) -> list[Section]:
    """The class docstring, then its public methods (and __init__), in source order."""
    sections = []
    doc = ast.get_docstring(node)
    if doc:
        sections.append(Section(f"class {node.name}", tuple(_paragraphs(doc))))
    for sub in node.body:
        if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef) and (
            not sub.name.startswith("_") or sub.name == "__init__"
        ):
            sec = _function_section(sub, f"{node.name}.")
            if sec:
                sections.append(sec)
    return [s for s in sections if s.paragraphs]


def _n_words(sections: list[Section]) -> int:
    return sum(len(p.split()) for s in sections for p in s.paragraphs)


def _module_pages(
    module: str, tree: ast.Module, split_words: int
) -> list[tuple[str, str, list[Section]]]:
    """(id suffix, title, sections) of one module's pages.

    Like many reference manuals, a class with enough text of its own gets its own page
    ("json.JSONDecoder"); the module page keeps the lead text, functions and small classes.
    """
    main: list[Section] = []
    own_pages = []
    lead = ast.get_docstring(tree)
    if lead:
        main.append(Section(None, tuple(_paragraphs(lead))))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            secs = _class_sections(node)
            if _n_words(secs) >= split_words:
                own_pages.append((f"{module}.{node.name}", f"{module}.{node.name}", secs))
            else:
                main.extend(secs)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith(
            "_"
        ):
            sec = _function_section(node)
            if sec:
                main.append(sec)
    main = [s for s in main if s.paragraphs]
    return [(module, module, main), *own_pages]


def _shingles(words: list[str], w: int = 5) -> set[tuple[str, ...]]:
    lowered = [x.lower() for x in words]
    return {tuple(lowered[i : i + w]) for i in range(max(len(lowered) - w + 1, 1))}


def _trim(sections: list[Section], max_words: int) -> list[Section]:
    """Keep whole sections until `max_words`, so huge modules stay page-sized."""
    out, total = [], 0
    for s in sections:
        n = sum(len(p.split()) for p in s.paragraphs)
        if out and total + n > max_words:
            break
        out.append(s)
        total += n
    return out


@functools.lru_cache(maxsize=4)
def _module_documents(
    split_words: int, root: str
) -> tuple[tuple[str, str, tuple[Section, ...]], ...]:
    """(name, title, sections) of every page of every module: the slow part (parsing), cached."""
    out = []
    for module, path in _module_files(Path(root)):
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError, OSError):
            continue
        out.extend(
            (name, title, tuple(secs))
            for name, title, secs in _module_pages(module, tree, split_words)
        )
    return tuple(out)


@functools.lru_cache(maxsize=16)
def _all_documents(
    min_words: int, max_words: int, split_words: int, root: str
) -> tuple[Document, ...]:
    docs: list[Document] = []
    seen: set[tuple[str, ...]] = set()
    for name, title, sections in _module_documents(split_words, root):
        doc = Document(f"stdlib:{name}", title, tuple(_trim(list(sections), max_words)))
        words = doc.words
        if len(words) < min_words:
            continue
        # Some modules repeat another's docstrings (pure-Python twins, re-exports); such
        # pages would be unlabelled near-duplicates, so a page must be mostly new text.
        sh = _shingles(words)
        if len(sh & seen) > _MAX_OVERLAP * len(sh):
            continue
        seen |= sh
        docs.append(doc)
    return tuple(docs)


def stdlib_documents(
    min_words: int = 80, limit: int | None = None, max_words: int = 3000, split_words: int = 200
) -> list[Document]:
    """Documents made of the standard library's docstrings, one per public module.

    A module page holds the module docstring followed by its public functions and small classes
    as headed sections; a class with at least `split_words` words of its own gets its own page.
    Pages are trimmed to about `max_words`. Modules with fewer than `min_words` words
    are left out, and so are modules whose text is mostly already in an earlier page, so no two
    documents are near-duplicates of each other. Same Python version, same result.
    """
    docs = _all_documents(min_words, max_words, split_words, str(stdlib_root()))
    return list(docs if limit is None else docs[:limit])
