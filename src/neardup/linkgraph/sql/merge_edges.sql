-- Edges of the trivial cluster graph (Cho et al. 2000, Figure 9 and section 4):
--   similar clusters:  |Ri| = s = d = |Rj|   (every page of Ri links to its own page of Rj);
--   extended clusters: |Ri| = s >= d = |Rj|  (Rj is copied on fewer sites: partial mirrors).
CREATE OR REPLACE TEMP TABLE merge_edges AS
SELECT ri, rj, a, b, s, d, (s = d) AS is_similar
FROM link_summary
WHERE a = s AND d = b AND (s = d OR ($extended AND s > d));
