"""What arrowlog writes, as bytes: segments, checkpoints, control records,
column statistics, compacted-object indexes, topic descriptors and the bucket
layout. Pure functions and values; nothing here does I/O."""
