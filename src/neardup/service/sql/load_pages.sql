SELECT url, doc_key, group_id, length, signature, exact_fp, redirect_to, links_in, verified,
       removed, dim_lengths, shingle_fp, n_tokens
FROM pages
