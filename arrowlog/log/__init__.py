"""The log as a user holds it: :class:`~arrowlog.log.client.ArrowLog` (topics,
partitions, producers, consumers, and maintenance and administration handed out
as objects of their own) and the topic catalog it keeps."""
