"""Ingest: read crawl files into `RawRecord`s and extract text and links from them.

Readers frame records in the main process (`iter_records`); `extract_page` turns one record
into an `ExtractedPage` and is meant to run in worker processes.
"""

from neardup.ingest.extract import extract_page
from neardup.ingest.readers import InputError, detect_input_kind, expand_inputs, iter_records
from neardup.ingest.record import ExtractedPage, RawRecord

__all__ = [
    "ExtractedPage",
    "InputError",
    "RawRecord",
    "detect_input_kind",
    "expand_inputs",
    "extract_page",
    "iter_records",
]
