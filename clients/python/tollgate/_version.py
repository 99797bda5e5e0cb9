"""The client's version: the one place it is written.

The build backend (_backend/tollgate_backend.py) reads it into the
package's metadata, and the client sends it in its User-Agent. Semantic
versioning, shared with the TypeScript client (clients/typescript's
package.json, checked by tests/test_version.py): both clients carry the
same number and are released together.
"""

__version__ = "0.1.0"
