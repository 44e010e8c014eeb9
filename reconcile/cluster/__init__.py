"""The API boundary: access, errors, transport, calls, one request path; read, apply, handover."""
