"""Pure deciders (command -> records) and reducers (record -> view). No I/O, no clock, no unseeded
randomness. Filled in by the KRaft, S3Stream and BookKeeper state machines."""
