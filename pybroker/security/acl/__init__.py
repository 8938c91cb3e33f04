"""Authorization: ACL bindings, the authorizer's decision and where bindings are stored."""
