"""What a client may take: client quotas (produce/fetch bytes, request time), the request
quota's throttle, and the memory pool that bounds buffered requests."""
