-- URL suffixes of the pages that mirror pairs share (Fetterly et al. 2004): the query is
-- dropped, and the last k = 1..4 slash-separated arcs of the path (all arcs when there are
-- fewer) are hashed together with the page's cluster, so that a suffix matches only between
-- near-duplicate pages. arcs is the number of arcs of the path.
CREATE OR REPLACE TEMP TABLE suffix_keys AS
WITH paths AS (
    SELECT
        p.doc_id,
        p.host,
        p.cluster_id,
        list_filter(
            string_split(regexp_replace(regexp_replace(p.url, '^[A-Za-z][A-Za-z0-9+.-]*://[^/]*', ''), '[?#].*$', ''), '/'),
            lambda x: x <> ''
        ) AS arcs
    FROM pages AS p
    JOIN cluster_hosts AS ch ON ch.cluster_id = p.cluster_id AND ch.host = p.host
    WHERE p.skipped_reason IS NULL
      AND p.host IN (SELECT host_a FROM mirror_pairs UNION SELECT host_b FROM mirror_pairs)
)
SELECT
    doc_id,
    host,
    cluster_id,
    len(arcs) AS arcs,
    k,
    hash(cluster_id, array_to_string(arcs[len(arcs) - k + 1:], '/')) AS key
FROM paths, range(1, 5) AS r(k)
WHERE k <= len(arcs)
ORDER BY host, doc_id, k;
