"""Local fake servers (127.0.0.1) answering like the real services, for the tests."""
