-- One row per cluster of two pages or more, from the run's pages table ({pages}): its size,
-- hosts, distinct texts, weakest similarity to the representative, and the representative.
-- Read by build.sql (embedded) and by the Spark engine's publish step, so both write the
-- same clusters table.
SELECT
    m.cluster_id,
    count(*) AS size,
    count(DISTINCT m.host) AS n_hosts,
    count(DISTINCT m.class_id) AS n_distinct_texts,
    min(m.similarity_to_representative) AS min_similarity,
    any_value(r.doc_id) AS representative_doc_id,
    any_value(r.url) AS representative_url,
    any_value(r.title) AS representative_title
FROM {pages} AS m
JOIN (SELECT doc_id, url, title FROM {pages} WHERE is_representative AND cluster_size >= 2) AS r
    ON r.doc_id = m.cluster_id
WHERE m.cluster_size >= 2
GROUP BY m.cluster_id
