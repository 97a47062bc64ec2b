-- One row of headline figures for the scan summary.
SELECT
    count(*) AS records,
    count(*) FILTER (WHERE skipped_reason IS NULL) AS sketched,
    count(*) FILTER (WHERE skipped_reason IS NOT NULL) AS skipped,
    count(*) FILTER (WHERE cluster_size >= 2) AS pages_in_clusters,
    count(*) FILTER (WHERE cluster_size >= 2 AND NOT is_representative) AS duplicates,
    (SELECT count(*) FROM clusters) AS clusters,
    coalesce((SELECT max(size) FROM clusters), 0) AS largest_cluster,
    count(DISTINCT exact_fp) FILTER (WHERE skipped_reason IS NULL) AS distinct_payloads,
    count(DISTINCT lexical_fp) FILTER (WHERE skipped_reason IS NULL) AS distinct_texts,
    count(DISTINCT shingle_fp) FILTER (WHERE skipped_reason IS NULL) AS distinct_shingle_sets,
    count(DISTINCT component_id) FILTER (WHERE skipped_reason IS NULL) AS components,
    count(DISTINCT identical_id) FILTER (WHERE skipped_reason IS NULL) AS identical_groups
FROM pages;
