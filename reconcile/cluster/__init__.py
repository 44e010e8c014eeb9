"""The API boundary: access, the HTTP client and its retries, read, apply, handover."""
