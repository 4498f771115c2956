"""trainfit."""
