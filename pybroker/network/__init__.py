"""Bytes to requests and back: accepting connections, one task per connection, TLS on the
raw socket, connection limits and idle reaping, dispatch to the handlers, the request log."""
