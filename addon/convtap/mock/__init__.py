"""The local upstream: a stand-in for ChatGPT's conversation backend and the Responses API that
plays scenarios (data files shipped here), the reference client, and the demo. Nothing imports
it but the CLI and the tests. May import every layer below it."""
