-- The service's persistent index. No PRIMARY KEY constraints: every batch rewrites the rows
-- it touched with DELETE + INSERT inside one transaction, which DuckDB's eager constraint
-- checks would reject; uniqueness is kept by that rewrite instead.
CREATE TABLE IF NOT EXISTS settings (key VARCHAR, value VARCHAR);
CREATE TABLE IF NOT EXISTS pages (
    url VARCHAR,
    doc_key BIGINT,          -- xxh3-64 of the URL (stable id across processes)
    group_id BIGINT,         -- NULL for redirects and removed pages
    length INTEGER,          -- distinct shingles
    signature BLOB,          -- min-hash values, uint32 little-endian
    exact_fp BIGINT,
    redirect_to VARCHAR,
    links_in INTEGER,        -- the page's own in-links (redirect credit is added when read)
    verified BOOLEAN,        -- resemblance to its winner >= threshold (winners: true)
    updated_at TIMESTAMP,
    removed BOOLEAN,
    dim_lengths INTEGER[],   -- words per sub-dictionary: the tier-2 partition key
    shingle_fp BIGINT,       -- shingle-set fingerprint: the scan's equivalence classes
    n_tokens INTEGER         -- words, for the scan's min_tokens
);
-- Stores written before the length mapping: add the column, drop the old LSH band table
-- (tier 2 rebuilds whatever it needs from the signatures when the index is opened).
ALTER TABLE pages ADD COLUMN IF NOT EXISTS dim_lengths INTEGER[];
ALTER TABLE pages ADD COLUMN IF NOT EXISTS shingle_fp BIGINT;
ALTER TABLE pages ADD COLUMN IF NOT EXISTS n_tokens INTEGER;
DROP TABLE IF EXISTS bands;
CREATE TABLE IF NOT EXISTS groups (
    group_id BIGINT,
    winner_url VARCHAR,
    winner_signature BLOB,
    size INTEGER,
    failed INTEGER,          -- losers that failed verification against the winner
    updated_at TIMESTAMP
);
CREATE INDEX IF NOT EXISTS pages_url ON pages (url);
CREATE INDEX IF NOT EXISTS groups_id ON groups (group_id);
