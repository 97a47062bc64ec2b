"""The index's state in memory and the algorithm that changes it, batch by batch: no file
writer, no Spark, no HTTP (see `neardup.index`)."""
