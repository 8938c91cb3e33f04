"""SASL authentication (KIP-43, KIP-152, KIP-368): the mechanisms a SASL listener offers,
the per-connection exchange, and the SCRAM credentials they check. Nothing here imports
trio: the handlers and the gate in dispatch drive it."""
