"""The HTTP service: appends over HTTP with group commit and exactly-once, reads, views, audits
(``kraftlake serve``)."""
