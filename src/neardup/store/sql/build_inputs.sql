-- The tables the run's pages table is made of (store/pages_table.py writes it, a range of doc
-- ids at a time, before build.sql writes the others). {staging} is the staging directory.

CREATE TEMP VIEW assignments AS
SELECT * FROM read_parquet('{staging}/assignments.parquet');

-- The sketch figures and min-hash values (written by `SketchSink`, steps/sketch.py, in doc_id order).
CREATE VIEW sketches AS SELECT * FROM read_parquet('sketches.parquet');

-- Page text, already in doc_id order as the ingest stage wrote it.
CREATE VIEW page_text AS SELECT * FROM read_parquet('page_text.parquet');
