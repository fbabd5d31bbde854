"""What a capture says to the team's observability stack: what each model answer cost
(`cost`, priced by genai-prices), and a capture as OpenTelemetry traces in the GenAI semantic
conventions (`spans`), written as OTLP/JSON or sent over OTLP/HTTP (`otlp`), live from the
recorder process too (`live`). May import `store`, `redact`, `contract`, `wire` and `models`."""
