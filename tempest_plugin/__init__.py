"""nova-rdt's Tempest plugin (RFC 2544 isolation tests): not built yet."""
