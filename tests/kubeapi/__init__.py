"""Test support shipped with the package: the Kubernetes API test server.

It lives inside the package (not under tests/) because tests, benchmarks,
`node-holder simulate` and `make demo` all use it.
"""
