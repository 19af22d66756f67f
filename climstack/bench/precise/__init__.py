"""The precise profile of `climstack bench local --precise` (run by `make bench`): pinned,
quiet, warmed-up, interleaved runs repeated until the headline is conclusive, with a
known-effect control and an A/A control that show what the method can and cannot find."""
