"""Emulators of the providers' batch APIs (OpenAI Batch, Anthropic Message Batches).

Small Starlette apps, run on loopback by the tests and the bench, with failure
modes a test programs per batch (`Behaviour`) and an account of what each
still keeps (`held()`), so a run can assert that nothing of the app's is left.
"""
