"""The incremental duplicate index: a persistent two-tier index of pages that gives the
scan's clusters for the pages it holds, kept current batch by batch.

Rooms, each importing only the rooms below it (import-linter keeps them so; see
docs/architecture.md):

- `feed`, `handle`: `neardup add` and `open_index`, the index's Python API;
- `engines/`: where work that needs no lock runs: the embedded engine and Spark's
  (`IndexEngine`: sketch a feed's inputs, search and score against the saved arrays,
  write a save's band tables);
- `service_index`: `ServiceIndex`, the open index: its state, its files and its locks;
- `files/`: the store on disk: manifest, segments, the saves of the graph's arrays, the
  conversion of old indexes;
- `state/`: the state and the algorithm: pages, groups and winners, tier 2, lengths, the
  scan graph, the band buckets, the overlay helper and the batch's apply.

`neardup.service` (the HTTP API) sits above this package; `neardup.pipeline` below it.
"""
