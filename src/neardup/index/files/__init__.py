"""The index's store on disk: the manifest, the segments of rows, the saves of the graph's
arrays and of its changes, the writer lock, the conversion of old indexes (see
`neardup.index`)."""
