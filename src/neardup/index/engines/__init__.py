"""The index's engines: the embedded one and Spark's, behind one interface
(`base.IndexEngine`; see `neardup.index`)."""
