"""Every tunable parameter of a scan, in one frozen dataclass.

Settings travel with data: they are written into every run directory and index, and reading
an index with different settings is an error rather than silently comparing sketches made
with different hash seeds or shingle sizes.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

# Defined with the kernels, which raise it too and may not import this module; re-exported
# here so that `neardup.config.SettingsError` stays the one class callers catch.
from neardup.errors import SettingsError

METHODS = (
    "minhash",
    "supershingles",
    "exact",
    "chunks",
    "broder-min",
    "broder-mod",
    "broder-supershingles",
    "simhash",
)
# Shivakumar & Garcia-Molina (1998): the chunkings, with their default threshold T of shared
# chunks (the paper's 15 for four lines and 25 for two; ours for the others, see
# docs/methods.md).
CHUNKINGS = {"lines4": 15, "lines2": 25, "sentences": 10, "paragraphs": 5, "document": 1}
CHUNK_JOINS = ("iceberg", "sort")
CONTAINMENT_METHODS = ("broder-min", "broder-mod")
VERIFY_MODES = ("sketch", "exact")
# The K-value sketch of a page (see kernels/oph.py and kernels/minhash.py): "oph" is
# one-permutation hashing with optimal densification, O(n + K) per page; "classic" is K
# independent hash functions, O(n * K), the papers' own method. Kept here as a literal, not
# imported, so that loading the settings loads no kernel (a test checks the two agree).
SKETCHES = ("oph", "classic")
CLUSTER_RULES = ("core", "center", "transitive")
# The decoded body size above which a record is skipped as "payload too large". Readers
# stream bodies up to it (ingest/limits.py), so a bomb or a huge record never sits in memory.
DEFAULT_MAX_PAYLOAD_BYTES = 20_000_000

# Settings that decide which records are compared (`ingest/eligibility.py`): a service
# index keeps the ones it was made with, and refuses others (`check_same_pages`).
URL_PATTERN_KEYS = ("include_url", "exclude_url")
ELIGIBILITY_KEYS = (
    "include_error_pages",
    "include_crawler_files",
    *URL_PATTERN_KEYS,
    "min_tokens",
)

# Settings that change the sketches themselves: two indexes can only be compared when these match.
SKETCH_KEYS = (
    "shingle_size",
    "wrap_shingles",
    "num_perm",
    "sketch",
    "seed",
    "max_shingle_df",
    "supershingle_count",
    "supershingle_size",
)


@dataclass(frozen=True)
class Settings:
    """Parameters of a scan. Defaults follow today's MinHash-LSH practice (K=128, t=0.8).

    `fetterly()` gives the 2004 paper's configuration (5-word shingles with wrap-around,
    84 min-hashes, 6 super-shingles of 14, megashingle candidates).
    """

    # Tokens and shingles (Broder et al. 1997: w-word shingles of the canonical token stream).
    shingle_size: int = 5
    wrap_shingles: bool = False
    # Min-hash sketch: K values per page from K seeded 64-bit hash functions.
    num_perm: int = 128
    seed: int = 1
    # How the K values are made: "oph" (one hash per shingle into K bins, empty bins densified;
    # unbiased, O(n + K) per page) or "classic" (K hash functions per shingle, O(n * K), as
    # Broder and Fetterly). None picks by method: classic for "supershingles", whose test
    # (two of six runs of 14 positions agree) needs the positions to be independent, which a
    # densified sketch's are not for short pages (it made wrong merges, docs/benchmarks.md);
    # oph otherwise. Settings files written before this option existed hold classic sketches
    # and load as such (`from_dict`).
    sketch: str | None = None
    # Shingles shared by more pages than this are dropped (Broder §5.1); 0 keeps every shingle,
    # and the pair count stays bounded by capping buckets (`max_bucket_pairs`). Kept by
    # default: on crawls of thousands of pages a site's template crosses 1000 pages, and
    # dropping it changes the resemblance of short pages (see docs/benchmarks.md).
    max_shingle_df: int = 0
    # Fetterly et al. 2004: super-shingles of consecutive min-hash values.
    supershingle_count: int = 6
    supershingle_size: int = 14
    # Candidate generation and verification.
    method: str = "minhash"
    threshold: float = 0.8
    bands: int | None = None
    rows: int | None = None
    # When bands/rows are tuned: the smallest probability that a pair at exactly `threshold`
    # shares a band. Verification drops false candidates cheaply; a missed one is lost.
    band_recall: float = 0.95
    verify: str = "sketch"
    # A bucket larger than this emits a chain of edges instead of all its pairs.
    max_bucket_pairs: int = 64
    # Clustering: "core" joins pages linked by strong pairs (>= core_threshold), then groups
    # those cores around centres; "center" keeps every member verified against its
    # representative; "transitive" is plain connected components over verified pairs.
    cluster_rule: str = "core"
    # Strong-pair similarity for the core rule; None means halfway from threshold to 1.
    core_threshold: float | None = None
    # Chunk fingerprints (method "chunks", Shivakumar & Garcia-Molina 1998): pages sharing at
    # least `chunk_threshold` distinct chunks (None: the chunking's default T) are pairs.
    chunking: str = "lines4"
    chunk_threshold: int | None = None
    # All-pairs overlap: "iceberg" (probabilistic coarse counting into `iceberg_buckets`
    # counters, then exact counting of the heavy buckets' pairs) or "sort" (DuckDB GROUP BY).
    chunk_join: str = "iceberg"
    iceberg_buckets: int = 1 << 22
    # A chunk or Broder sketch element held by more pages than this makes no pairs (0: use
    # max_shingle_df when set, else no cap). Boilerplate lines would otherwise pair everything.
    max_feature_df: int = 200
    # Broder (1997) sketches: MIN_s keeps the s smallest fingerprints; MOD_m those = 0 mod m
    # (a power of two), doubling m for a page whose sketch would exceed `mod_max` elements.
    min_s: int = 128
    mod_m: int = 16
    mod_max: int = 512
    # Broder super-shingles: the sorted MIN_s sketch shingled again, `broder_supershingle_size`
    # consecutive values per super-shingle.
    broder_supershingle_size: int = 4
    # Report pairs where one page is contained in the other at least this much (broder-min
    # and broder-mod only), in the `containment` table; None: not computed.
    containment: float | None = None
    # SimHash (Charikar 2002): pages within this Hamming distance of 64 bits are pairs.
    simhash_distance: int = 3
    # Ingest. Links feed the collections and mirrors work; a pure dedup run can skip them.
    extract_links: bool = True
    # Each page's text in the run (`page_text`): the web UI, the report's snippets and
    # `neardup query` show or compare it. Without it (`--no-text`) the run holds
    # the table with no rows, and the scan neither moves the text out of its workers nor
    # compresses it, when no stage of the scan reads it back (`steps.ingest.text_read_back`).
    keep_text: bool = True
    # Which records are compared (the one rule is `ingest/eligibility.py`): 4xx/5xx pages
    # only with `include_error_pages`; a crawler's own files (robots.txt, sitemaps, ...;
    # `eligibility.CRAWLER_FILES`) only with `include_crawler_files`; with `include_url`,
    # only URLs one of those regular expressions is found in; never a URL one of
    # `exclude_url` is found in (searched anywhere in the URL, as wget's --accept-regex and
    # --reject-regex). Stored with every run and index, so that the scan and the index
    # compare the same pages.
    include_error_pages: bool = False
    include_crawler_files: bool = False
    include_url: tuple[str, ...] = ()
    exclude_url: tuple[str, ...] = ()
    min_tokens: int = 1
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES

    def __post_init__(self) -> None:
        if self.shingle_size < 1:
            raise SettingsError("shingle_size must be at least 1")
        if self.num_perm < 1:
            raise SettingsError("num_perm must be at least 1")
        if self.sketch is None:  # resolved here, so settings.json always names the sketch
            object.__setattr__(
                self, "sketch", "classic" if self.method == "supershingles" else "oph"
            )
        if self.sketch not in SKETCHES:
            raise SettingsError(f"sketch must be one of {', '.join(SKETCHES)}, not {self.sketch!r}")
        if not 0.0 < self.threshold <= 1.0:
            raise SettingsError("threshold must be in (0, 1]")
        if self.method not in METHODS:
            raise SettingsError(f"method must be one of {', '.join(METHODS)}, not {self.method!r}")
        if self.verify not in VERIFY_MODES:
            raise SettingsError(f"verify must be one of {', '.join(VERIFY_MODES)}")
        if self.cluster_rule not in CLUSTER_RULES:
            raise SettingsError(f"cluster_rule must be one of {', '.join(CLUSTER_RULES)}")
        if self.core_threshold is not None and not self.threshold <= self.core_threshold <= 1.0:
            raise SettingsError("core_threshold must be between threshold and 1")
        if not 0.0 < self.band_recall < 1.0:
            raise SettingsError("band_recall must be in (0, 1)")
        if self.max_shingle_df < 0:
            raise SettingsError("max_shingle_df must be >= 0 (0 disables the filter)")
        if (self.bands is None) != (self.rows is None):
            raise SettingsError("give both bands and rows, or neither (then they are tuned)")
        if (
            self.bands is not None
            and self.rows is not None
            and (self.bands < 1 or self.rows < 1 or self.bands * self.rows > self.num_perm)
        ):
            raise SettingsError(f"bands*rows must be between 1 and num_perm ({self.num_perm})")
        if self.supershingle_count < 2 or self.supershingle_size < 1:
            raise SettingsError("need at least 2 super-shingles of at least 1 value")
        if self.method == "supershingles" and self.supershingle_values > self.num_perm:
            raise SettingsError(
                f"supershingles need {self.supershingle_values} min-hash values "
                f"({self.supershingle_count} x {self.supershingle_size}), "
                f"num_perm is {self.num_perm}"
            )
        if self.max_bucket_pairs < 2:
            raise SettingsError("max_bucket_pairs must be at least 2")
        if self.chunking not in CHUNKINGS:
            raise SettingsError(f"chunking must be one of {', '.join(CHUNKINGS)}")
        if self.chunk_threshold is not None and self.chunk_threshold < 1:
            raise SettingsError("chunk_threshold must be at least 1")
        if self.chunk_join not in CHUNK_JOINS:
            raise SettingsError(f"chunk_join must be one of {', '.join(CHUNK_JOINS)}")
        if self.iceberg_buckets < 2 or self.iceberg_buckets & (self.iceberg_buckets - 1):
            raise SettingsError("iceberg_buckets must be a power of two")
        if self.max_feature_df < 0:
            raise SettingsError("max_feature_df must be >= 0 (0: max_shingle_df, or no cap)")
        if self.min_s < 1:
            raise SettingsError("min_s must be at least 1")
        if self.mod_m < 1 or self.mod_m & (self.mod_m - 1):
            raise SettingsError("mod_m must be a power of two (Broder's 2^i adjustment)")
        if self.mod_max < 1:
            raise SettingsError("mod_max must be at least 1")
        if not 1 <= self.broder_supershingle_size <= self.min_s:
            raise SettingsError("broder_supershingle_size must be between 1 and min_s")
        if self.containment is not None:
            if not 0.0 < self.containment <= 1.0:
                raise SettingsError("containment must be in (0, 1]")
            if self.method not in CONTAINMENT_METHODS:
                raise SettingsError(
                    "containment is estimated by the Broder sketches: use method "
                    + " or ".join(CONTAINMENT_METHODS)
                )
        if not 1024 <= self.max_payload_bytes <= 1 << 32:
            raise SettingsError("max_payload_bytes must be between 1024 and 4 GiB")
        if not 0 <= self.simhash_distance <= 31:
            raise SettingsError("simhash_distance must be between 0 and 31")
        if self.min_tokens < 0:
            raise SettingsError("min_tokens must be >= 0")
        for name in URL_PATTERN_KEYS:
            object.__setattr__(self, name, _patterns(name, getattr(self, name)))

    @property
    def strong_similarity(self) -> float:
        """The similarity from which pairs join one core (the core rule)."""
        if self.core_threshold is not None:
            return self.core_threshold
        return (1.0 + self.threshold) / 2.0

    @property
    def chunk_min_shared(self) -> int:
        """T: the shared chunks that make two pages a pair."""
        if self.chunk_threshold is not None:
            return self.chunk_threshold
        return CHUNKINGS[self.chunking]

    @property
    def feature_df_cap(self) -> int:
        """Pages a chunk or sketch element may be held by and still make pairs (0: no cap)."""
        return self.max_feature_df or self.max_shingle_df

    @property
    def supershingle_values(self) -> int:
        return self.supershingle_count * self.supershingle_size

    @property
    def has_supershingles(self) -> bool:
        """Super-shingles are computed whenever the sketch is long enough to hold them."""
        return self.supershingle_values <= self.num_perm

    @classmethod
    def fetterly(cls, **overrides: Any) -> Settings:
        """The configuration of Fetterly, Manasse & Najork (2004), with their sketch: 84
        independent min-hash functions (classic), whose 14-value super-shingles agree with
        probability exactly r^14."""
        base: dict[str, Any] = dict(
            shingle_size=5,
            wrap_shingles=True,
            num_perm=84,
            sketch="classic",
            supershingle_count=6,
            supershingle_size=14,
            method="supershingles",
        )
        base.update(overrides)
        return cls(**base)

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settings:
        """Settings as stored (`to_dict`). A dict without `sketch` was written before the
        one-permutation sketch existed, when every sketch was classic: it loads as
        `sketch="classic"`, so an old run or index is never compared with the new default.
        Likewise a dict without `include_crawler_files` was written when crawler files were
        compared like pages: it loads as `include_crawler_files=True`, so an old index goes
        on with the rule its stored pages were chosen by."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise SettingsError(f"unknown settings: {', '.join(sorted(unknown))}")
        return cls(**{"sketch": "classic", "include_crawler_files": True, **data})

    @classmethod
    def from_json(cls, text: str) -> Settings:
        return cls.from_dict(json.loads(text))

    def check_compatible(self, other: Settings) -> None:
        """Fail loudly when sketches made with `other` cannot be compared with ours."""
        diffs = [
            f"{k}: {getattr(self, k)!r} here, {getattr(other, k)!r} in the index"
            for k in SKETCH_KEYS
            if getattr(self, k) != getattr(other, k)
        ]
        if diffs:
            raise SettingsError("sketch settings differ: " + "; ".join(diffs))

    def check_same_pages(self, other: Settings) -> None:
        """Fail loudly when `other` would compare other records than ours (the settings of
        `ELIGIBILITY_KEYS`): an index compares the pages its stored rule chose, and a second
        rule would leave it agreeing with no scan."""
        diffs = [
            f"{k}: {_shown(getattr(other, k))} asked, {_shown(getattr(self, k))} in the index"
            for k in ELIGIBILITY_KEYS
            if getattr(self, k) != getattr(other, k)
        ]
        if diffs:
            raise SettingsError(
                "the index was made with other rules for which pages are compared ("
                + "; ".join(diffs)
                + "): use a new store, or give the index's own"
            )


def _shown(value: Any) -> str:
    """A setting's value in an error line: patterns as a list, the rest as repr."""
    if isinstance(value, tuple):
        return "[" + ", ".join(repr(v) for v in value) + "]" if value else "none"
    return repr(value)


def _patterns(name: str, value: Any) -> tuple[str, ...]:
    """URL patterns as a tuple of strings (a list, as JSON stores them, is accepted), each a
    valid regular expression; a bad one is a one-line SettingsError naming it."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise SettingsError(f"{name} must be a list of regular expressions")
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as err:
            problem = f"{pattern!r} is not a regular expression ({err})"
            raise SettingsError(f"{name}: {problem}") from None
    return tuple(value)
