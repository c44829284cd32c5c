"""A local cluster of containers that behave like GPU servers, for the demo and the tests."""
