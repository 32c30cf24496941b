"""The web room: ``fetch`` (the SSRF-safe fetcher), ``extract`` (what a page says), ``search`` (providers)."""
