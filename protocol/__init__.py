"""Kafka's wire protocol, sans-I/O: bytes in, objects out.

Nothing here imports trio, opens sockets or touches files, so the broker, the tools, the tests
and any client can share it.
"""
