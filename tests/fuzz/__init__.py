"""gdsdiag's own fuzzer (issue 24): ``python3 -m tests.fuzz`` from the checkout (long mode), and
tests/test_fuzz.py for a few seconds of it in CI. See tests/fuzz/__main__.py for the options."""
