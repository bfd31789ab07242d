"""Recommendations: the rules and their life cycle."""
