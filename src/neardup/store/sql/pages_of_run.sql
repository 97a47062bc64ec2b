-- The run's pages table: one row per input record, its sketch figures, its cluster and, for a
-- page without one, why. Read by build.sql (embedded) and, input by input, by the Spark
-- engine's per-input tasks (`spark/run_parts.py`), so both engines write it with this SQL in
-- DuckDB. Its placeholders are the staged records, the assignments with their cluster sizes
-- (sized_assignments.sql) and the minimum word count; `sketches` is a table.
SELECT
    p.doc_id,
    p.url,
    p.host,
    p.status,
    p.content_type,
    p.format,
    p.title,
    TRY_CAST(p.fetched_at AS TIMESTAMPTZ) AS fetched_at,
    p.payload_digest,
    p.redirect_to,
    p.ip,
    p.record_type,
    p.record_id,
    p.concurrent_to,
    p.source,
    p.record_offset,
    p.length,
    p.payload_bytes,
    p.n_links,
    p.exact_fp,
    s.lexical_fp,
    s.shingle_fp,
    s.n_tokens,
    s.n_shingles,
    a.cluster_id,
    a.cluster_size,
    CASE WHEN a.cluster_id IS NULL THEN NULL ELSE a.cluster_id = p.doc_id END
        AS is_representative,
    a.component_id,
    a.identical_id,
    a.class_id,
    a.similarity_to_representative,
    COALESCE(
        p.skipped_reason,
        CASE
            WHEN s.doc_id IS NOT NULL AND a.doc_id IS NULL THEN
                CASE
                    WHEN s.n_tokens = 0 THEN 'no words'
                    WHEN s.n_tokens < {min_tokens} THEN 'too few words'
                    ELSE 'no shingles left after dropping common shingles'
                END
        END
    ) AS skipped_reason
FROM {pages_raw} AS p
LEFT JOIN sketches AS s ON s.doc_id = p.doc_id
LEFT JOIN {sized} AS a ON a.doc_id = p.doc_id
