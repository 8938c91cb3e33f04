"""Who a connection is and what it may do: the session's principal, TLS (context and
certificate principal mapping), SASL (mechanisms, SCRAM credentials), ACLs (model, store,
authorizer), and the inter-broker listener's client security."""
