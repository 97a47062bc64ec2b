"""Every tunable parameter of a scan, in one frozen dataclass.

Settings travel with data: they are written into every run directory and index, and reading
an index with different settings is an error rather than silently comparing sketches made
with different hash seeds or shingle sizes.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

METHODS = ("minhash", "supershingles")
VERIFY_MODES = ("sketch", "exact")
CLUSTER_RULES = ("core", "center", "transitive")

# Settings that change the sketches themselves: two indexes can only be compared when these match.
SKETCH_KEYS = (
    "shingle_size",
    "wrap_shingles",
    "num_perm",
    "seed",
    "max_shingle_df",
    "supershingle_count",
    "supershingle_size",
)


class SettingsError(ValueError):
    """Raised for an impossible combination of parameters, or a mismatch with stored data."""


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
    # Ingest. Links feed the collections and mirrors work; a pure dedup run can skip them.
    extract_links: bool = True
    include_error_pages: bool = False
    min_tokens: int = 1
    max_payload_bytes: int = 20_000_000

    def __post_init__(self) -> None:
        if self.shingle_size < 1:
            raise SettingsError("shingle_size must be at least 1")
        if self.num_perm < 1:
            raise SettingsError("num_perm must be at least 1")
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

    @property
    def strong_similarity(self) -> float:
        """The similarity from which pairs join one core (the core rule)."""
        if self.core_threshold is not None:
            return self.core_threshold
        return (1.0 + self.threshold) / 2.0

    @property
    def supershingle_values(self) -> int:
        return self.supershingle_count * self.supershingle_size

    @property
    def has_supershingles(self) -> bool:
        """Super-shingles are computed whenever the sketch is long enough to hold them."""
        return self.supershingle_values <= self.num_perm

    @classmethod
    def fetterly(cls, **overrides: Any) -> Settings:
        """The configuration of Fetterly, Manasse & Najork (2004)."""
        base: dict[str, Any] = dict(
            shingle_size=5,
            wrap_shingles=True,
            num_perm=84,
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
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise SettingsError(f"unknown settings: {', '.join(sorted(unknown))}")
        return cls(**data)

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
