-- One row per copy (collection) of a kept cluster, noise copies left out; the principal first.
SELECT
    pr.root_pid AS collection_cluster_id,
    c.root_pid AS collection_id,
    c.host,
    c.n_hosts,
    c.pages,
    c.ext_in AS links_from_other_sites,
    c.copy = pr.copy AS is_principal,
    rp.url AS root_url,
    c.min_url,
    c.max_url
FROM copies AS c
JOIN principal AS pr ON pr.comp = c.comp
JOIN pages AS rp ON rp.doc_id = c.root_pid
WHERE pr.root_pid IN (SELECT collection_cluster_id FROM kept_clusters)
    AND c.pages >= $min_size
ORDER BY collection_cluster_id, is_principal DESC, c.pages DESC, collection_id;
