"""Reading: read_committed visibility (the last stable offset, snapshots across
partitions), the :class:`~arrowlog.read.consumer.Consumer`, and the planned,
parallel scan behind the Spark source and the exports."""
