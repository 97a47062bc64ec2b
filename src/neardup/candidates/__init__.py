"""Candidate pairs: documents that share a bucket key (an LSH band or a megashingle)."""

from neardup.candidates.buckets import CandidateStats, bucket_candidates, unpack_pairs

__all__ = ["CandidateStats", "bucket_candidates", "unpack_pairs"]
