"""Build a WARC crawl from real documentation manuals, for benchmarks.

The manuals in ../shared/data/docs are two releases each of real hyperlinked documentation
sites (PostgreSQL, Python, LLVM) with real drift between releases. This script hosts each
release tree under a made-up host and URL prefix, rewrites relative links to absolute URLs,
and writes WARC response+request records, so a benchmark sees a crawl whose text and link
structure are real while its mirror topology is stated in `topology.json`.

The data is read at run time only and never copied into the repository; it is absent on
users' machines, so nothing outside bench/ and realdata tests depends on it.

Topologies:
  pairs    each manual's two releases on two hosts (input of the accuracy benchmark);
  mirrors  per manual: primary (newer release), full mirror, stale copy (older release),
           partial mirror (a stated share of pages missing, links to them go to the primary)
           and a re-rooted copy under another URL prefix.

    python bench/docs_crawl.py --out bench/out/docs-crawl [--manuals postgresql python llvm]
                               [--topology pairs|mirrors] [--drop-share 0.3] [--seed 0]
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import numpy as np

try:
    from neardup.synth.writers import CrawlRecord, write_warc
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from neardup.synth.writers import CrawlRecord, write_warc

DOCS_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "docs"
CRAWL_START = datetime(2024, 4, 2, 8, 0, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Release:
    """One release of a manual: its archive and the name it is given in host names."""

    manual: str
    archive: str  # file name without .tar.xz
    version: str
    label: str  # short tag used in host names, e.g. "pg15-18"

    @property
    def path(self) -> Path:
        return DOCS_DIR / f"{self.archive}.tar.xz"


# (older, newer) release of each manual.
MANUALS: dict[str, tuple[Release, Release]] = {
    "postgresql": (
        Release("postgresql", "postgresql-doc-15_15.18-0+deb12u1", "15.18", "pg15-18"),
        Release("postgresql", "postgresql-doc-15_15.20-0+deb12u1", "15.20", "pg15-20"),
    ),
    "python": (
        Release("python", "python3.11-doc_3.11.2-6+deb12u8", "3.11.2-deb12u8", "py311-u8"),
        Release("python", "python3.11-doc_3.11.2-6+deb12u9", "3.11.2-deb12u9", "py311-u9"),
    ),
    "llvm": (
        Release("llvm", "llvm-15-doc_1_15.0.6-4", "15.0.6", "llvm15"),
        Release("llvm", "llvm-16-doc_1_16.0.6-15~deb12u1", "16.0.6", "llvm16"),
    ),
}
# URL prefix of each manual on its "home" host and on the mirrors of the pairs topology.
PREFIXES = {
    "postgresql": ("/docs/15/", "/postgresql/15/"),
    "python": ("/3.11/", "/python/3.11/"),
    "llvm": ("/docs/", "/llvm/docs/"),
}

_MEMBER_ROOT = re.compile(r"^(?:\./)?usr/share/doc/[^/]+/(?:html/)?")
_LINK = re.compile(rb"""(\s(?:href|src)\s*=\s*)(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
_FILE_ROOT = "file:///usr/share/doc/"
_KEEP = ("#", "mailto:", "javascript:", "data:", "tel:")


def manual_releases(manual: str) -> tuple[Release, Release]:
    """(older, newer) release of a manual named in MANUALS."""
    try:
        return MANUALS[manual]
    except KeyError:
        raise SystemExit(f"unknown manual {manual!r}; known: {', '.join(MANUALS)}") from None


def _archive_path(release: Release | str | Path) -> Path:
    if isinstance(release, Release):
        return release.path
    if isinstance(release, str) and release in MANUALS:
        return MANUALS[release][1].path  # a manual's name means its newer release
    path = Path(release)
    if path.exists():
        return path
    name = path.name if path.name.endswith(".tar.xz") else f"{path.name}.tar.xz"
    return DOCS_DIR / name


@functools.lru_cache(maxsize=4)
def _read_archive(path: Path) -> tuple[tuple[str, bytes], ...]:
    pages = []
    with tarfile.open(path, "r:xz") as tar:
        for member in tar:
            if not member.isfile() or not member.name.endswith((".html", ".htm")):
                continue
            rel = _MEMBER_ROOT.sub("", member.name)
            fh = tar.extractfile(member)
            if fh is not None:
                pages.append((rel, fh.read()))
    return tuple(sorted(pages))


def docs_pages(release: Release | str | Path) -> list[tuple[str, bytes]]:
    """(relative path, HTML bytes) of every page of a release, sorted by path.

    `release` is a Release, an archive name (with or without .tar.xz), a path to an archive,
    or a manual's name (its newer release). Paths are relative to the manual's html root,
    e.g. "library/json.html"; bytes are the file as installed, links untouched.
    """
    path = _archive_path(release)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found (the docs data is only on developer machines)")
    return list(_read_archive(path))


def absolutize_links(
    html: bytes,
    page_url: str,
    redirect: Callable[[str], str] | None = None,
    site_base: str | None = None,
) -> bytes:
    """Rewrite relative href/src values to absolute URLs resolved against `page_url`.

    Fragment-only, mailto: and javascript: links are left alone. Debian's packages also hold
    absolute `file:///usr/share/doc/<pkg>/html/...` links (e.g. canonical links); with
    `site_base` these point into the hosted copy instead. `redirect` may map a resolved URL
    to another (a partial mirror linking to the original for pages it lacks).
    """

    def repl(m: re.Match[bytes]) -> bytes:
        quoted = m.group(2) if m.group(2) is not None else m.group(3)
        value = quoted.decode("latin-1")
        stripped = value.strip()
        if not stripped or stripped.startswith(_KEEP):
            return m.group(0)
        if site_base and stripped.startswith(_FILE_ROOT):
            stripped = site_base + _MEMBER_ROOT.sub("", stripped[len("file:///") :])
        absolute = stripped if urlsplit(stripped).scheme else urljoin(page_url, stripped)
        if redirect is not None:
            absolute = redirect(absolute)
        quote = b'"' if m.group(2) is not None else b"'"
        return m.group(1) + quote + absolute.encode("latin-1") + quote

    return _LINK.sub(repl, html)


@dataclass
class HostPlan:
    """One host of the benchmark crawl: which release it serves where, and what it lacks."""

    manual: str
    role: str  # release-a, release-b, primary, full, stale, partial, rerooted
    host: str
    prefix: str
    release: Release
    day: int
    dropped: tuple[str, ...] = ()
    link_fallback: str | None = None  # base URL that serves pages this host lacks

    @property
    def base(self) -> str:
        return f"https://{self.host}{self.prefix}"


def plan_pairs(manual: str) -> list[HostPlan]:
    """The two releases of a manual on two hosts with different prefixes."""
    old, new = manual_releases(manual)
    a, b = PREFIXES[manual]
    return [
        HostPlan(manual, "release-a", f"{old.label}.docs.example", a, old, 0),
        HostPlan(manual, "release-b", f"{new.label}.mirror.example", b, new, 1),
    ]


def plan_mirrors(manual: str, drop_share: float, rng: np.random.Generator) -> list[HostPlan]:
    """Primary, full mirror, stale copy, partial mirror and re-rooted copy of a manual."""
    old, new = manual_releases(manual)
    prefix = PREFIXES[manual][0]
    paths = [p for p, _ in docs_pages(new)]
    drop = rng.random(len(paths)) < drop_share
    dropped = tuple(p for p, d in zip(paths, drop, strict=True) if d)
    primary = HostPlan(manual, "primary", f"{manual}.docs.example", prefix, new, 0)
    return [
        primary,
        HostPlan(manual, "full", f"{manual}.mirror-a.example", prefix, new, 1),
        HostPlan(manual, "stale", f"{manual}-old.mirror-b.example", prefix, old, 1),
        HostPlan(
            manual, "partial", f"{manual}.mirror-c.example", prefix, new, 2, dropped, primary.base
        ),
        HostPlan(manual, "rerooted", "mirror-d.example", f"/pub/docs/{manual}/current/", new, 2),
    ]


def host_records(plan: HostPlan, ip: str) -> list[CrawlRecord]:
    """Response records of one host, in path order, a fetch every second on its crawl day."""
    dropped = set(plan.dropped)
    own_base = plan.base

    def redirect(url: str) -> str:
        if plan.link_fallback and url.startswith(own_base):
            rel = urlsplit(url[len(own_base) :]).path
            if rel in dropped:
                return plan.link_fallback + url[len(own_base) :]
        return url

    records = []
    t = CRAWL_START + timedelta(days=plan.day)
    for rel, html in docs_pages(plan.release):
        if rel in dropped:
            continue
        url = own_base + rel
        t += timedelta(seconds=1)
        body = absolutize_links(html, url, redirect if plan.link_fallback else None, own_base)
        records.append(
            CrawlRecord(
                url=url,
                fetched_at=t,
                body=body,
                ip=ip,
                server="nginx/1.22.1",
                role=plan.role,
                original=f"{plan.manual}:{rel}",
                collection=plan.manual,
            )
        )
    return records


def build(
    out: Path,
    manuals: list[str],
    topology: str,
    drop_share: float,
    seed: int,
    layout: str = "response-first",
) -> dict:
    """Write one WARC per host into `out` and return the topology (also in topology.json)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    plans: list[HostPlan] = []
    for manual in manuals:
        if topology == "pairs":
            plans += plan_pairs(manual)
        else:
            plans += plan_mirrors(manual, drop_share, rng)
    hosts = []
    for k, plan in enumerate(plans):
        ip = f"198.51.100.{10 + k}"
        records = host_records(plan, ip)
        warc = out / f"{plan.manual}-{plan.role}-{plan.host}.warc.gz"
        n_records = write_warc(
            warc,
            records,
            info={"description": f"{plan.release.archive} served at {plan.base}"},
            layout=layout,
        )
        hosts.append(
            {
                "manual": plan.manual,
                "role": plan.role,
                "host": plan.host,
                "prefix": plan.prefix,
                "base_url": plan.base,
                "release": plan.release.archive,
                "version": plan.release.version,
                "pages": len(records),
                "warc": warc.name,
                "warc_records": n_records,
                "dropped_pages": list(plan.dropped),
                "missing_pages_link_to": plan.link_fallback,
            }
        )
        print(f"{warc.name}: {len(records)} pages, {n_records} WARC records", file=sys.stderr)
    info = {
        "topology": topology,
        "seed": seed,
        "drop_share": drop_share if topology == "mirrors" else None,
        "source": str(DOCS_DIR),
        "hosts": hosts,
        "note": "pages with the same relative path on two hosts are copies of one original "
        "(same release) or versions of one page (different releases)",
    }
    (out / "topology.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/out/docs-crawl"))
    parser.add_argument("--manuals", nargs="+", default=list(MANUALS), choices=list(MANUALS))
    parser.add_argument("--topology", choices=("pairs", "mirrors"), default="pairs")
    parser.add_argument(
        "--drop-share", type=float, default=0.3, help="share of pages the partial mirror lacks"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--layout",
        choices=("response-first", "commoncrawl"),
        default="response-first",
        help="record order and fields: Common Crawl's is request, response, metadata",
    )
    args = parser.parse_args(argv)
    if not DOCS_DIR.is_dir():
        print(f"{DOCS_DIR} is absent: the docs benchmark needs the shared data", file=sys.stderr)
        return 2
    for old in args.out.glob("*.warc.gz"):
        old.unlink()
    started = time.perf_counter()
    info = build(args.out, args.manuals, args.topology, args.drop_share, args.seed, args.layout)
    pages = sum(h["pages"] for h in info["hosts"])
    records = sum(h["warc_records"] for h in info["hosts"])
    print(
        f"wrote {len(info['hosts'])} WARC files, {pages} pages, {records} records to {args.out} "
        f"in {time.perf_counter() - started:.1f}s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
