"""The process underneath the broker: the timers' clock, periodic tasks, malloc and open-file
limits, and the log layout. Nothing here knows a Kafka request; every layer may use it."""
