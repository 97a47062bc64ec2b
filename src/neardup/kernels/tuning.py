"""Choose LSH bands × rows for a threshold, recall first.

The usual tuning (datasketch's) balances the areas of false positives and false negatives
under the S-curve 1 - (1 - s^r)^b. For K = 128 at t = 0.8 that gives 9 × 13, which makes a pair
at exactly the threshold a candidate only 40 % of the time and a pair at 0.9 only 93 % of the
time. A scan verifies every candidate, so a false candidate costs one signature comparison,
while a missed one is lost for good: here we take the longest bands (fewest false candidates)
that still catch a pair at the threshold with probability `recall`.
"""

from __future__ import annotations


def candidate_probability(similarity: float, bands: int, rows: int) -> float:
    """Probability that two pages of this resemblance share at least one band."""
    return 1.0 - (1.0 - similarity**rows) ** bands


def recall_first_bands(threshold: float, num_perm: int, recall: float = 0.95) -> tuple[int, int]:
    """(bands, rows) with bands = num_perm // rows and the largest rows meeting `recall`."""
    best = (num_perm, 1)
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        if candidate_probability(threshold, bands, rows) >= recall:
            best = (bands, rows)
        else:
            break
    return best
