-- Spark SQL variant of suffix_keys.sql (same table, same meaning; read that file first).
-- Why a variant and not one shared statement: the step splits a path into its arcs and
-- hashes the last k of them, and no spelling of that is accepted by both engines:
--   * dropping the empty arcs needs a list lambda: DuckDB (2.x) accepts only
--     `list_filter(l, lambda x: ...)`, Spark SQL only `filter(l, x -> ...)`;
--   * the last k arcs: DuckDB slices `l[a:b]` (1-based, inclusive), Spark `slice(l, start, n)`;
--     list length: `len` against `size`; joining: `array_to_string` against `array_join`;
--   * the key must be a 64-bit hash: DuckDB's `hash` is one, Spark's `hash` is a 32-bit
--     Murmur3 (collisions by the million at a billion pages), so Spark uses `xxhash64`.
-- The keys differ between engines, but they are only compared with each other, inside one
-- run's Bloom filters, so the suffix matches they yield are the same. No ORDER BY: a view
-- keeps no order, and `mirrors._confirm` needs none.
CREATE OR REPLACE TEMP TABLE suffix_keys AS
WITH paths AS (
    SELECT
        p.doc_id,
        p.host,
        p.cluster_id,
        filter(
            split(regexp_replace(regexp_replace(p.url, '^[A-Za-z][A-Za-z0-9+.-]*://[^/]*', ''), '[?#].*$', ''), '/'),
            x -> x <> ''
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
    CAST(size(arcs) AS BIGINT) AS arcs,
    CAST(k AS BIGINT) AS k,
    xxhash64(cluster_id, array_join(slice(arcs, size(arcs) - k + 1, k), '/')) AS key
FROM paths
CROSS JOIN (VALUES (1), (2), (3), (4)) AS r(k)
WHERE k <= size(arcs);
