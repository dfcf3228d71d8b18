"""LTI 1.3: Ringlab as a tool an LMS launches (OIDC login, launch, deep linking, grades, roster).

The protocol and its crypto are ``pylti1p3``'s (the pylti1p3next distribution); ``adapter`` fits it to
FastAPI and our database and hardens it where it is weak (single-use nonces, a key-set refetch on an
unknown key id, access tokens cached per issuer, client id and scopes, timeouts on every call).
"""
