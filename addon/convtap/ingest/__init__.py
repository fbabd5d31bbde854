"""Offline input: capture files (.mitm, HAR, raw .sse, other capture databases) read into the
same recorder events as live traffic (`readers`), a capture decoded again or merged
(`replay`), what the commands do to a capture as a whole (`capture`), its findings made from its
content (`findings`), and `convtap decode` (`decoding`, which `rendering` writes out; the
content view uses `rendering` alone). May import `record` and everything below it."""
