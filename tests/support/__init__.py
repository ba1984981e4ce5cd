"""Builders shared by the tests, by domain; conftest modules hold only fixtures and import from here."""
