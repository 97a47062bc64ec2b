-- Sort-based all-pairs overlap (Shivakumar & Garcia-Molina 1998; Broder et al. 1997, phase 3):
-- every pair of documents sharing a feature (chunk fingerprint, sketch element) becomes one
-- row per shared feature, and the rows are counted per pair.
-- `postings(fp, doc)` holds distinct rows, common features already dropped;
-- {threshold} is T, the shared features a pair needs.
SELECT a.doc AS doc_a, b.doc AS doc_b, count(*) AS shared
FROM postings AS a
JOIN postings AS b ON a.fp = b.fp AND a.doc < b.doc
GROUP BY a.doc, b.doc
HAVING count(*) >= {threshold}
ORDER BY doc_a, doc_b;
